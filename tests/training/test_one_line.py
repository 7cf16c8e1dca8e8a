"""Failures a run meets on its own, and inputs no schema sees, through train.py: one line on
stderr, in bounded time, and nothing already on disk lost."""

import re
import subprocess
import sys

import pytest

from tests.test_bad_input import snapshot, train
from tests.training.test_resume import ENVIRONMENT, ROOT
from tests.training.test_run_record import RUN
from training.checkpoints import CheckpointStore

# `python -c FILLING_DISK ARGUMENTS...` runs train.py on a disk that is full from its first
# checkpoint on, for the TensorBoard writer (which writes in a thread of its own) first.
FILLING_DISK = """
import errno, runpy, sys
from tensorboard.summary.writer import record_writer
from training import loop

full = []
save_checkpoint, write = loop.Training.save_checkpoint, record_writer.RecordWriter.write

def save_then_fill(self):
    path = save_checkpoint(self)
    full.append(True)
    return path

def write_unless_full(self, data):
    if full:
        raise OSError(errno.ENOSPC, "No space left on device")
    write(self, data)

loop.Training.save_checkpoint = save_then_fill
record_writer.RecordWriter.write = write_unless_full
sys.argv[0] = "train.py"
runpy.run_path("train.py", run_name="__main__")
"""


def test_a_disk_that_fills_under_the_event_writer_stops_the_run_in_one_line(tmp_path):
    run_dir = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-c", FILLING_DISK, *RUN, f"hydra.run.dir={run_dir}"],
        cwd=ROOT,
        env=ENVIRONMENT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 1
    assert re.fullmatch(
        r"error: the run stopped at step \d+: a write failed \(\[Errno 28\] No space left on "
        r"device\); its checkpoint at step 100 is intact: make room, then resume with: python "
        rf"train\.py resume={re.escape(str(run_dir))}\n",
        result.stderr,
    ), result.stderr
    assert CheckpointStore(run_dir / "checkpoints").read_latest()["step"] == 100


@pytest.mark.parametrize(
    ("text", "problem", "how"),
    [
        ("agent: [unclosed\n", "is unreadable: while parsing a flow sequence", "resume"),
        ("agent: [unclosed\n", "is unreadable: while parsing a flow sequence", "hydra.run.dir"),
        (
            '!!python/object/apply:os.system ["touch {tmp}/ran"]\n',
            "is unreadable: could not determine a constructor for the tag "
            "'tag:yaml.org,2002:python/object/apply:os.system'",
            "resume",
        ),
        ("", "is empty: it holds no settings", "resume"),
    ],
    ids=["not YAML", "not YAML, the command again", "a tag that would run code", "empty"],
)
def test_a_run_directory_whose_config_cannot_be_read_is_one_line(tmp_path, text, problem, how):
    """As evaluate.py and reporting say it, and nothing in the YAML runs."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = run_dir / "config.yaml"
    config.write_text(text.format(tmp=tmp_path))
    before = snapshot(tmp_path)
    result = train(*RUN, f"{how}={run_dir}") if how != "resume" else train(f"resume={run_dir}")
    assert (result.returncode, result.stderr) == (2, f"error: run config {config} {problem}\n")
    assert snapshot(tmp_path) == before


def test_an_interpolation_to_a_missing_key_is_one_line_naming_the_key(tmp_path):
    result = train(*RUN, "agent.learning_rate=${nonexistent.key}", f"hydra.run.dir={tmp_path}/run")
    assert (result.returncode, result.stderr) == (
        2,
        "error: agent.learning_rate: interpolation key 'nonexistent.key' not found\n",
    )
    assert list(tmp_path.iterdir()) == []


HUGE = "x" * 100_000


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        (
            [*RUN, f"replay.priority_signal={HUGE}"],
            f"replay.priority_signal={HUGE[:80]}... (100000 characters) is not allowed: must be "
            "one of td_error, td_error_change, parameter_change, huber_loss",
        ),
        (
            [f"env.game={HUGE}"],  # an Atari game
            f"unknown game '{HUGE[:79]}... (100002 characters) (env.game). Accepted: ale-py ROM "
            "ids (e.g. breakout), display names (Breakout) or gymnasium ids (ALE/Breakout-v5).",
        ),
    ],
    ids=["a setting", "the game"],
)
def test_a_huge_value_is_shown_by_its_start_and_its_length(tmp_path, arguments, line):
    result = train(*arguments, f"hydra.run.dir={tmp_path}/run")
    assert (result.returncode, result.stderr) == (2, f"error: {line}\n")
