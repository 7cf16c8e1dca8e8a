"""On real Breakout, with its lost lives and a ring that wraps: every transition the replay can
hand the learner is exactly what the agent saw, did and got at one step (the reward clipped),
its next state is what the agent saw at the next step (unless the step is terminal), and its
terminal flag is that step's game over or lost life. Random play; no update."""

import numpy as np
import pytest
from test_loop_rules import config

import train
from launch.validation import run_settings
from training.checkpoints import CheckpointStore
from training.loop import StopRequest, Training
from training.run_record import RunRecord, config_record

STEPS, CAPACITY = 1_500, 1_000
# Below Breakout's smallest score (1), so that random play's rewards are all clipped.
REWARD_CLIP = 0.5


class Witness:
    """Wraps the policy and the env of a run to record, per storage slot, the state the agent
    acted on, the action the env took, its reward clipped to ±REWARD_CLIP and whether the
    game ended or a life was lost."""

    def __init__(self, training: Training):
        self.storage = training.parts.replay.storage
        self.seen: dict[int, dict] = {}
        self._state = None
        policy, env = training.parts.agent.policy, training.parts.env
        act, step = policy.act, env.step

        def watched_act(state, epsilon, rng=None):
            self._state = state.copy()
            return act(state, 1.0)  # random play: the untrained network's choice does not matter

        def watched_step(action):
            frame, reward, terminated, truncated, info = step(action)
            slot = (self.storage.cursor - 1) % self.storage.capacity  # the acted-on frame's
            self.seen[slot] = dict(
                state=self._state,
                action=action,
                reward=max(-REWARD_CLIP, min(REWARD_CLIP, reward)),
                terminal=terminated or info["life_lost"],
            )
            return frame, reward, terminated, truncated, info

        policy.act, env.step = watched_act, watched_step


@pytest.mark.parametrize("life_loss", ["new_episode", "stop_bootstrap"])
@pytest.mark.parametrize("kind", ["atari", "lean_atari"])
def test_every_sampleable_transition_is_one_the_agent_lived(tmp_path, kind, life_loss):
    cfg = config(
        "env.game=breakout",
        f"env.kind={kind}",
        f"train.life_loss={life_loss}",
        f"replay.capacity={CAPACITY}",
        f"train.learning_start_steps={STEPS + 1}",
        f"train.reward_clip={REWARD_CLIP}",
    )
    run = run_settings(cfg)
    training = Training(
        train.build(run),
        run,
        tmp_path,
        CheckpointStore(tmp_path / "c"),
        StopRequest(),
        RunRecord(tmp_path, config_record(cfg)),
    )
    training.start(None)
    witness = Witness(training)
    for _ in range(STEPS):
        training.step += 1
        training._act_and_store()
    training.progress.close()
    storage = witness.storage
    # The newest frame's slot has no step yet: the agent's state now is what it will act on.
    witness.seen[(storage.cursor - 1) % CAPACITY] = dict(state=training.parts.frame_stack.state)

    slots = np.flatnonzero(storage.sampleable)
    assert storage.frames_written > CAPACITY  # the ring has wrapped
    states = np.empty((2 * len(slots), storage.history_length, 84, 84), dtype=np.uint8)
    storage.gather_transitions(slots, states)
    terminals = clipped = 0
    for row, slot in enumerate(slots):
        lived = witness.seen[slot]
        np.testing.assert_array_equal(states[row], lived["state"])
        assert storage.actions[slot] == lived["action"]
        assert storage.rewards[slot] == lived["reward"]
        assert storage.terminals[slot] == float(lived["terminal"])
        if not lived["terminal"]:
            following = witness.seen[(slot + 1) % storage.capacity]["state"]
            np.testing.assert_array_equal(states[len(slots) + row], following)
        terminals += lived["terminal"]
        clipped += lived["reward"] == REWARD_CLIP
    assert terminals >= 5  # Breakout's random play loses a life every 40 steps or so
    assert clipped >= 1
