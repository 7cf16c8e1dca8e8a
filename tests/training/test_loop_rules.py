"""The loop's rules on hand-built cases: ε before and after learning starts, α annealing,
what a lost life does to the stored episode and the acting state under each
`train.life_loss` rule, the order in which a run writes its last files, and the one
checkpoint a finished run keeps."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import train
from agents.updates import LearnStats
from artifacts.run_directory import RunDirectory
from launch.validation import run_settings
from training import loop
from training.checkpoints import CheckpointStore
from training.loop import Components, LearningDiverged, StopRequest, Training
from training.run_record import RunRecord, config_record

CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")
LIFE_LOST_AT = 3  # the scripted env loses a life on its 3rd step


def config(*overrides: str):
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        return compose(config_name="config", overrides=["experiment=demo", *overrides])


class ScriptedEnv:
    """Frame n of the game is filled with n; a life is lost on step LIFE_LOST_AT; the no-ops
    after it show frame 100 (the game goes on)."""

    def __init__(self):
        self.frame_number, self.noop_calls = 0, 0

    def _frame(self, value: int) -> np.ndarray:
        return np.full((84, 84), value % 256, dtype=np.uint8)

    def reset(self, seed=None):
        self.frame_number = 0
        return self._frame(1), {"episode_frame_number": 0}

    def step(self, action):
        self.frame_number += 1
        info = {"life_lost": self.frame_number == LIFE_LOST_AT, "episode_frame_number": 0}
        return self._frame(1 + self.frame_number), 0.0, False, False, info

    def noops_after_life_loss(self):
        self.noop_calls += 1
        return self._frame(100), False, {"episode_frame_number": 0}

    def capture_state(self):
        return {"frame_number": self.frame_number}

    def close(self):
        pass


def scripted_training(tmp_path, *overrides: str) -> Training:
    cfg = config("env.game=breakout", "replay.capacity=50", *overrides)
    run = run_settings(cfg)
    built = train.build(run)
    built.env.close()
    parts = Components(ScriptedEnv(), built.agent, built.replay, built.frame_stack, 0, built.rngs)
    record = RunRecord(tmp_path, config_record(cfg))
    training = Training(
        parts, run, tmp_path, CheckpointStore(tmp_path / "c"), StopRequest(), record
    )
    training.start(None)
    return training


def training_after(steps: int, tmp_path, *overrides: str) -> Training:
    training = scripted_training(tmp_path, *overrides)
    for _ in range(steps):
        training.step += 1
        training._act_and_store()
    training.progress.close()
    return training


def test_new_episode_rule_restarts_the_stack_after_the_no_ops(tmp_path):
    training = training_after(LIFE_LOST_AT + 1, tmp_path, "train.life_loss=new_episode")
    storage = training.parts.replay.storage
    assert training.parts.env.noop_calls == 1
    # Slots: 0..3 the first life (frames 1..4, the last marked terminal), 4.. the next one.
    assert storage.terminals[LIFE_LOST_AT - 1] == 1.0
    assert storage.episode_starts[LIFE_LOST_AT + 1]
    assert storage.frames[LIFE_LOST_AT + 1, 0, 0] == 100
    states = np.empty((1, 4, 84, 84), dtype=np.uint8)
    storage.gather_states(np.array([LIFE_LOST_AT + 1]), out=states)
    assert [int(f[0, 0]) for f in states[0]] == [0, 0, 0, 100]
    # The acting state follows the same rule: frame 100, then the next step's frame 5.
    assert [int(f[0, 0]) for f in training.parts.frame_stack.state] == [0, 0, 100, 5]


def test_stop_bootstrap_rule_only_marks_the_terminal(tmp_path):
    training = training_after(LIFE_LOST_AT + 1, tmp_path, "train.life_loss=stop_bootstrap")
    storage = training.parts.replay.storage
    assert training.parts.env.noop_calls == 0
    assert storage.terminals[LIFE_LOST_AT - 1] == 1.0
    assert not storage.episode_starts[1:].any()
    assert [int(f[0, 0]) for f in training.parts.frame_stack.state] == [2, 3, 4, 5]


def test_ignore_rule_stores_no_terminal_and_goes_on(tmp_path):
    """Dopamine's rule: a lost life is not a terminal; the episode and its stack run on."""
    training = training_after(LIFE_LOST_AT + 1, tmp_path, "train.life_loss=ignore")
    storage = training.parts.replay.storage
    assert training.parts.env.noop_calls == 0
    assert not storage.terminals[: LIFE_LOST_AT + 1].any()
    assert not storage.episode_starts[1:].any()
    assert [int(f[0, 0]) for f in training.parts.frame_stack.state] == [2, 3, 4, 5]


@pytest.mark.parametrize(
    ("step", "expected"), [(0, 1.0), (1_000, 1.0), (3_500, 0.505), (6_000, 0.01), (9_000, 0.01)]
)
def test_epsilon_is_1_until_learning_starts_then_anneals(step, expected, tmp_path):
    # demo: learning starts at 1,000 steps, ε anneals 1 -> 0.01 over the next 5,000.
    training = training_after(0, tmp_path)
    training.step = step
    assert training.epsilon() == pytest.approx(expected)


@pytest.mark.parametrize("log_period", [50, 300])
def test_annealed_alpha_follows_its_schedule_whatever_the_log_period(log_period, tmp_path):
    training = scripted_training(
        tmp_path,
        "replay=proportional",
        "replay.priority_exponent_final=0.0",
        "replay.priority_exponent_period_steps=100",
        "train.total_steps=400",
        "train.learning_start_steps=100",
        f"train.log_period_steps={log_period}",
        "evaluation.every_frames=1000000",
    )
    replay, applied = training.parts.replay, []
    set_alpha = replay.set_priority_exponent
    replay.set_priority_exponent = lambda alpha: (
        applied.append((training.step, alpha)) or (set_alpha(alpha))
    )
    assert training.run() is None
    # α goes 0.6 -> 0 linearly from learning start (100) to the last step (400).
    assert [step for step, _ in applied] == [100, 200, 300, 400]
    assert [alpha for _, alpha in applied] == pytest.approx([0.6, 0.4, 0.2, 0.0])
    assert replay.priority_exponent == 0.0


@pytest.mark.parametrize(("loss", "mean_q"), [(0.1, 2.4e8), (float("nan"), 1.0), (0.1, -1001.0)])
def test_a_diverged_learner_stops_the_run_before_its_priorities_are_stored(tmp_path, loss, mean_q):
    """|Q| beyond ten times what clipped rewards allow (1 / (1 − 0.99) = 100), or a
    non-finite loss, ends the run; the batch's priorities are not written."""
    training = training_after(1200, tmp_path)  # past the demo's learning start (1,000 steps)
    replay = training.parts.replay
    errors = np.zeros(replay.batch_size, dtype=np.float32)
    stats = LearnStats(errors, loss, mean_q)
    training.parts.agent.start_learning = lambda batch: SimpleNamespace(result=lambda: stats)
    before = replay.priorities().copy()
    with pytest.raises(LearningDiverged, match=r"^the learner diverged at step 1200: loss "):
        training._learn()
    np.testing.assert_array_equal(replay.priorities(), before)


class Killed(Exception):
    """Where a kill would stop the process."""


def test_the_final_snapshot_which_marks_a_run_finished_is_written_last(tmp_path, monkeypatch):
    """A run stopped as it writes its final snapshot (after which a resume changes nothing)
    has written its hyperparameters and results already."""
    training = scripted_training(
        tmp_path,
        "train.total_steps=40",
        "train.learning_start_steps=32",
        "train.log_period_steps=20",
        "evaluation.every_frames=1000000",
    )

    def killed(*arguments, **keywords):
        raise Killed

    monkeypatch.setattr(loop, "save_agent_snapshot", killed)
    with pytest.raises(Killed):
        training.run()
    run = RunDirectory(tmp_path)
    hparams = EventAccumulator(str(run.tensorboard / "hparams")).Reload()
    assert "hparams/final_return" in hparams.Tags()["scalars"]
    assert not run.final_snapshot.exists()
    # Resumed, it writes them again: in place of the first, one session in TensorBoard.
    training.progress.hyperparameters(training.cfg, float("nan"))
    training.progress.close()
    assert len(list((run.tensorboard / "hparams").glob("events.out.tfevents.*"))) == 1


def test_a_finished_run_keeps_only_its_last_checkpoint(tmp_path):
    training = scripted_training(
        tmp_path,
        "train.total_steps=40",
        "train.learning_start_steps=32",
        "checkpoint.every_steps=15",
        "evaluation.every_frames=1000000",
    )
    training.run()  # checkpoints at steps 15 (copy 0), 30 (copy 1) and 40 (copy 0 again)
    assert RunDirectory(tmp_path).final_snapshot.is_file()
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == [
        "frames-0.bin",
        "frames-0.json",
        "state-000000000040-frames0.pt",
    ]
