"""The next step's action, chosen right behind an update rather than at the next step's
start, changes nothing: over a short real run the same actions, chosen from the same
parameters, the same priorities after every update and the same final parameters as a run
that acts at each step's start (Algorithm 1's order)."""

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir

import train
from launch.validation import run_settings
from training.checkpoints import CheckpointStore
from training.loop import StopRequest, Training
from training.run_record import RunRecord, config_record

CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")
RUN = [
    "experiment=demo",
    "env.game=breakout",
    "agent.device=cpu",
    "replay=proportional",
    "replay.capacity=100",
    "env.max_episode_frames=240",  # episodes end within the run
    "train.total_steps=120",
    "train.batch_size=8",
    "train.learning_start_steps=40",
    "train.epsilon_decay_steps=60",  # greedy actions too, from the updated network
    "train.target_update_period_steps=50",
    "train.log_period_steps=30",
    "evaluation.every_frames=1000000",
]


def digest(network: torch.nn.Module) -> str:
    parameters = b"".join(p.detach().numpy().tobytes() for p in network.parameters())
    return hashlib.sha256(parameters).hexdigest()


def recorded_run(tmp_path: Path, act_ahead: bool) -> dict[str, list]:
    """The run's actions (with the parameters and state each was chosen from), the priorities
    after each update, and the final parameters."""
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name="config", overrides=RUN)
    run = run_settings(cfg)
    record = RunRecord(tmp_path, config_record(cfg))
    parts = train.build(run)
    training = Training(
        parts, run, tmp_path, CheckpointStore(tmp_path / "c"), StopRequest(), record
    )
    if not act_ahead:
        training._act_ahead = lambda: None  # every step acts at its start
    record = {"actions": [], "priorities": []}
    act, update_priorities = parts.agent.policy.act, parts.replay.update_priorities

    def recorded_act(state, epsilon, rng=None):
        action = act(state, epsilon, rng)
        record["actions"].append((epsilon, state.tobytes(), digest(parts.agent.online), action))
        return action

    def recorded_update(indices, learned):
        update_priorities(indices, learned)
        record["priorities"].append(parts.replay.priorities().copy())

    parts.agent.policy.act, parts.replay.update_priorities = recorded_act, recorded_update
    training.start(None)
    assert training.run() is None
    parts.env.close()
    record["final"] = [digest(parts.agent.online), digest(parts.agent.target)]
    return record


def test_acting_right_behind_the_update_is_acting_at_the_next_steps_start(tmp_path):
    ahead = recorded_run(tmp_path / "ahead", act_ahead=True)
    reference = recorded_run(tmp_path / "reference", act_ahead=False)
    # The comparison means something: 21 updates, and actions from the parameters before the
    # first and after each but the last (21 values), greedy ones among them.
    assert len(reference["actions"]) == 120 and len(reference["priorities"]) == 21
    assert len({parameters for _, _, parameters, _ in reference["actions"]}) == 21
    assert reference["actions"][-1][0] == pytest.approx(0.01)
    assert ahead["actions"] == reference["actions"]
    for after, expected in zip(ahead["priorities"], reference["priorities"], strict=True):
        np.testing.assert_array_equal(after, expected)
    assert ahead["final"] == reference["final"]
