"""A run's record of what it ran: its checkpoints hold its whole config and refuse a
config.yaml edited since; what a resume may change is allowed and recorded (changes.yaml), as
is a fallback; checkpoints from before the config was recorded still resume, exactly."""

import shutil
from pathlib import Path

import pytest
import torch
import yaml
from omegaconf import OmegaConf

from tests.test_bad_input import snapshot, train
from tests.training.test_resume import assert_same_run, launch, stderr
from training.checkpoints import CheckpointStore
from training.run_record import RunRecord, config_record, resumed_record

# A 200-step MinAtar run, stopped by SIGTERM at step 150 (checkpoints at 100 and 150).
RUN = [
    "experiment=minatar_dqn",
    "env.game=breakout",
    "agent.device=cpu",
    "agent.torch_compile=false",
    "threads=1",
    "train.total_steps=200",
    "train.batch_size=8",
    "train.learning_start_steps=40",
    "train.target_update_period_steps=50",
    "train.epsilon_decay_steps=100",
    "train.log_period_steps=25",
    "replay.capacity=100",
    "evaluation.every_frames=100",
    "evaluation.frames=30",
    "checkpoint.every_steps=100",
]
STATE = "state-000000000150-frames1.pt"


@pytest.fixture(scope="module")
def stopped(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("stopped") / "run"
    process = launch(run_dir, *RUN, f"hydra.run.dir={run_dir}", at_step=150, signals="SIGTERM")
    assert process.wait(timeout=600) == 0, stderr(run_dir)
    assert CheckpointStore(run_dir / "checkpoints").state_files()[-1].name == STATE
    return run_dir


def copy_of(stopped: Path, tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(stopped, run_dir)
    return run_dir


@pytest.mark.parametrize(
    ("stored", "edited", "line"),
    [
        ("discount: 0.99", "discount: 0.5", "agent.discount=0.5, but the run ran with 0.99"),
        (
            "learning_rate: 0.00025",
            "learning_rate: 0.001",
            "agent.learning_rate=0.001, but the run ran with 0.00025",
        ),
    ],
)
def test_a_config_yaml_edited_after_the_start_is_refused_naming_the_key(
    stopped, tmp_path, stored, edited, line
):
    run_dir = copy_of(stopped, tmp_path)
    config = run_dir / "config.yaml"
    assert config.read_text().count(stored) == 1
    config.write_text(config.read_text().replace(stored, edited))
    before = snapshot(run_dir)
    result = train(f"resume={run_dir}")
    key, _, rest = line.partition("=")
    value, _, ran = rest.partition(", but the run ran with ")
    assert (result.returncode, result.stderr) == (
        2,
        f"error: {config} has {key}={value}, but the run ran with {key}={ran} (checkpoint "
        f"{STATE}): a resumed run keeps its config; restore config.yaml\n",
    )
    assert snapshot(run_dir) == before


def test_a_setting_a_resume_may_change_is_allowed_and_recorded(stopped, tmp_path):
    run_dir = copy_of(stopped, tmp_path)
    result = train(f"resume={run_dir}", "agent.cuda_graphs=true")
    assert result.returncode == 0, result.stderr
    changes = run_dir / "changes.yaml"
    assert "note: agent.cuda_graphs=True from step 150 on (False before)" in result.stderr
    assert yaml.safe_load(changes.read_text()) == [
        {
            "step": 150,
            "setting": "agent.cuda_graphs",
            "from": False,
            "to": True,
            "why": "set when the run was resumed",
        }
    ]
    assert "cuda_graphs: false" in (run_dir / "config.yaml").read_text()  # as it started
    final = CheckpointStore(run_dir / "checkpoints").read_latest()["state"]
    assert final["config"]["agent"]["cuda_graphs"] is True
    assert final["changes"] == yaml.safe_load(changes.read_text())


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("uninterrupted") / "run"
    result = train(*RUN, f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr
    return run_dir


def test_a_checkpoint_from_before_configs_were_recorded_resumes_exactly(
    stopped, uninterrupted, tmp_path
):
    """What the code before this record wrote: the same state without `config` and
    `changes` (a run started then, such as a long Atari run, must go on)."""
    run_dir = copy_of(stopped, tmp_path)
    for path in CheckpointStore(run_dir / "checkpoints").state_files():
        payload = torch.load(path, weights_only=True)
        del payload["state"]["config"], payload["state"]["changes"]
        torch.save(payload, path)
    result = train(f"resume={run_dir}")
    assert result.returncode == 0, result.stderr
    assert (
        f"note: checkpoint {STATE} was written before checkpoints held the run's whole config"
        in result.stderr
    )
    assert_same_run(run_dir, uninterrupted)
    final = CheckpointStore(run_dir / "checkpoints").read_latest()["state"]
    assert final["config"] == yaml.safe_load((run_dir / "config.yaml").read_text())
    assert not (run_dir / "changes.yaml").exists()


def test_a_setting_a_fallback_changed_stays_as_the_run_ran_it(tmp_path):
    """A run whose updates fell back to eager ones goes on eagerly when resumed, whatever
    config.yaml says, and the notes say since when."""
    started = OmegaConf.create({"agent": {"torch_compile": True, "discount": 0.99}, "seed": 0})
    record = RunRecord(tmp_path, config_record(started))
    record.fall_back(40, "agent.torch_compile", "torch.compile failed (no compiler)")
    assert yaml.safe_load((tmp_path / "changes.yaml").read_text())[0]["to"] is False
    checkpoint = {"path": tmp_path / STATE, "step": 100, "state": record.state_dict()}
    cfg = OmegaConf.create({**config_record(started), "resume": str(tmp_path)})
    resumed, notes = resumed_record(tmp_path, cfg, checkpoint)
    assert cfg.agent.torch_compile is False
    assert resumed.config == record.config and resumed.changes == record.changes
    assert notes == [
        "note: agent.torch_compile=False since step 40 (torch.compile failed (no compiler); the "
        "run is no longer bit-identical to one that kept agent.torch_compile=true)"
    ]
    cfg.agent.discount = 0.5
    with pytest.raises(ValueError, match="has agent.discount=0.5, but the run ran with "):
        resumed_record(tmp_path, cfg, checkpoint)


def test_a_resume_that_goes_back_before_a_change_cuts_it_from_changes_yaml(tmp_path):
    record = RunRecord(tmp_path, {"agent": {"torch_compile": True}})
    record.fall_back(40, "agent.torch_compile", "torch.compile failed")
    assert (tmp_path / "changes.yaml").is_file()
    RunRecord(tmp_path, {"agent": {"torch_compile": True}}).write()  # from a checkpoint before
    assert not (tmp_path / "changes.yaml").exists()
