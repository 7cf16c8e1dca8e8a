"""A run's record of what it ran: its checkpoints hold its whole config and refuse a
config.yaml edited since; what a resume may change is allowed and recorded (changes.yaml), as
is a fallback; checkpoints from before the config was recorded still resume, exactly. Its
curves: a damaged event file is refused by a resume and by an export, not read in part."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from omegaconf import OmegaConf
from torch.utils.tensorboard import SummaryWriter

from artifacts.event_files import first_damage
from reporting.__main__ import main as reporting_main
from tests.test_bad_input import _flip_middle_byte, snapshot, train
from tests.training.test_resume import ENVIRONMENT, ROOT, assert_same_run, launch, stderr
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
    recorded = (run_dir / "config.yaml").read_text()
    assert "cuda_graphs: false" in recorded  # as it started
    assert recorded.startswith("# derived from the settings below:\n# the optimizer's ε: ")
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


def test_event_records_that_fail_their_checksums_or_are_cut_short_are_found(tmp_path):
    writer = SummaryWriter(str(tmp_path))
    for step in range(20):
        writer.add_scalar("episode/return", step, step)
    writer.close()
    (path,) = tmp_path.glob("events.out.tfevents.*")
    whole = path.read_bytes()
    assert first_damage(path) is None

    def with_byte_flipped(index: int) -> bytes:
        return whole[:index] + bytes([whole[index] ^ 0xFF]) + whole[index + 1 :]

    path.write_bytes(with_byte_flipped(len(whole) - 5))  # the last record's data, its last byte
    damage = first_damage(path)
    assert (damage.record, damage.problem, damage.cut_short) == (
        20,  # after the file's version record
        "fails the checksum of its data",
        False,
    )
    assert first_damage(path, damage.offset) is None  # the records before it are sound
    path.write_bytes(with_byte_flipped(0))
    assert (first_damage(path).offset, first_damage(path).problem) == (
        0,
        "fails the checksum of its length",
    )
    path.write_bytes(whole[:-3])
    assert first_damage(path).problem == "is cut short in its data"
    assert first_damage(path).cut_short


def test_a_damaged_event_file_is_refused_on_resume_and_changes_nothing(stopped, tmp_path):
    run_dir = copy_of(stopped, tmp_path)
    (events,) = (run_dir / "tensorboard").glob("events.out.tfevents.*")
    _flip_middle_byte(events)
    before = snapshot(run_dir)
    result = train(f"resume={run_dir}")
    assert result.returncode == 2
    assert re.fullmatch(
        rf"error: event file {re.escape(str(events))} is damaged at byte (\d+): record \d+ fails "
        r"the checksum of its (data|length): the events from there on would drop out of the "
        rf"run's curves; restore the file, or cut it there \(truncate -s \1 "
        rf"{re.escape(str(events))}\) to resume without them\n",
        result.stderr,
    ), result.stderr
    assert snapshot(run_dir) == before


def test_a_damaged_event_file_is_refused_by_export_before_anything_is_written(
    stopped, tmp_path, capsys
):
    run_dir = copy_of(stopped, tmp_path)
    (events,) = (run_dir / "tensorboard").glob("events.out.tfevents.*")
    _flip_middle_byte(events)
    out = tmp_path / "results"
    with pytest.raises(SystemExit) as exit:
        reporting_main(["export", str(run_dir), "--out", str(out)])
    assert exit.value.code == 2
    line = capsys.readouterr().err
    assert line.startswith(f"error: event file {events} is damaged at byte ")
    assert line.endswith(") to export the events before it\n") and line.count("\n") == 1
    assert not out.exists()


# `python -c FAILING_COMPILER ARGUMENTS...` runs train.py where torch.compile fails, as it does
# without a C++ compiler (at the first compiled call).
FAILING_COMPILER = """
import runpy, sys
import torch

def failing_compile(function, **options):
    def compiled(*arguments):
        raise RuntimeError("no C++ compiler found")
    return compiled

torch.compile = failing_compile
sys.argv[0] = "train.py"
runpy.run_path("train.py", run_name="__main__")
"""


def test_a_compiled_run_resumed_where_compiling_fails_records_the_fallback(uninterrupted, tmp_path):
    """Stopped before its first update, resumed where torch.compile fails: it goes on eagerly,
    says so, and its record says since when; it is then exactly the eager run."""
    run_dir = tmp_path / "run"
    compiled = [
        *(a for a in RUN if not a.startswith("agent.torch_compile")),
        f"hydra.run.dir={run_dir}",
    ]
    process = launch(run_dir, *compiled, at_step=30, signals="SIGTERM")
    assert process.wait(timeout=600) == 0, stderr(run_dir)
    result = subprocess.run(
        [sys.executable, "-c", FAILING_COMPILER, f"resume={run_dir}"],
        cwd=ROOT,
        env=ENVIRONMENT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    why = (
        "torch.compile failed (RuntimeError: no C++ compiler found); the run is no longer "
        "bit-identical to one that kept agent.torch_compile=true"
    )
    assert (
        f"note: agent.torch_compile=False from step 40 on (True before): {why}; recorded in "
        f"{run_dir / 'changes.yaml'}\n" in result.stderr
    )
    change = {"step": 40, "setting": "agent.torch_compile", "from": True, "to": False, "why": why}
    assert yaml.safe_load((run_dir / "changes.yaml").read_text()) == [change]
    final = CheckpointStore(run_dir / "checkpoints").read_latest()["state"]
    assert final["config"]["agent"]["torch_compile"] is False
    assert "torch_compile: true" in (run_dir / "config.yaml").read_text()  # as it started
    assert_same_run(run_dir, uninterrupted)
