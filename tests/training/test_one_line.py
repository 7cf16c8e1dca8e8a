"""Failures a run meets on its own, and inputs no schema sees, through train.py: one line on
stderr, in bounded time, and nothing already on disk lost."""

import re
import subprocess
import sys

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
