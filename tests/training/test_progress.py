"""The training run's TensorBoard scalars: written several to an event, each tag reads back
with the value and step that one `add_scalar` per scalar gives it; the console progress bar
of a resumed run."""

import re
import time
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from torch.utils.tensorboard import SummaryWriter

from training.progress import EVENT_FILES, Progress, write_scalars

# Values of the types the loop logs, some not exactly a float32.
VALUES = {
    "a/float": 0.1,
    "a/int": 108_000,
    "a/float32": np.float32(2.5e-7),
    "a/float64": np.float64(1 / 3),
    "a/int64": np.int64(-7),
    "a/bool": True,
    "a/nan": float("nan"),
}


def read_scalars(directory: Path) -> dict[str, list[tuple[int, float]]]:
    events = EventAccumulator(str(directory), size_guidance={"scalars": 0}).Reload()
    return {
        tag: [(event.step, event.value) for event in events.Scalars(tag)]
        for tag in events.Tags()["scalars"]
    }


def scalar_events(directory: Path) -> int:
    (path,) = directory.glob(EVENT_FILES)
    return sum(event.HasField("summary") for event in EventFileLoader(str(path)).Load())


def test_scalars_written_in_one_event_read_back_as_add_scalar_writes_them(tmp_path):
    with SummaryWriter(str(tmp_path / "one_by_one")) as writer:
        for step in (3, 12):
            for tag, value in VALUES.items():
                writer.add_scalar(tag, value, step)
    with SummaryWriter(str(tmp_path / "together")) as writer:
        for step in (3, 12):
            write_scalars(writer, VALUES, step)
    expected = read_scalars(tmp_path / "one_by_one")
    assert len(expected) == len(VALUES)
    np.testing.assert_equal(read_scalars(tmp_path / "together"), expected)  # NaN equals NaN
    assert scalar_events(tmp_path / "together") == 2


@pytest.mark.parametrize(("frame_skip", "events_per_episode"), [(4, 2), (1, 1)])
def test_an_episode_is_one_event_per_x_axis(tmp_path, frame_skip, events_per_episode):
    """Its return and length against agent steps and against frames, the same step on
    MinAtar."""
    progress = Progress(tmp_path, total_steps=100, frame_skip=frame_skip)
    for step, episode_return, frames in ((10, 1.0, 40), (25, -2.0, 60), (61, 0.0, 144)):
        progress.episode(step, episode_return, frames)
    progress.close()
    scalars = read_scalars(tmp_path / "tensorboard")
    assert scalars["episode/return"] == [(10, 1.0), (25, -2.0), (61, 0.0)]
    assert scalars["episode/length_frames"] == [(10, 40.0), (25, 60.0), (61, 144.0)]
    assert scalars["episode_vs_frames/return"] == [
        (10 * frame_skip, 1.0),
        (25 * frame_skip, -2.0),
        (61 * frame_skip, 0.0),
    ]
    assert scalars.keys() == {
        "episode/return",
        "episode/length_frames",
        "episode_vs_frames/return",
        "episode_vs_frames/length_frames",
    }
    assert scalar_events(tmp_path / "tensorboard") == 3 * events_per_episode


def test_a_resumed_runs_progress_bar_shows_no_negative_rate(tmp_path):
    """Stopped at step 1337, its log period began at step 1250: the bar goes back there."""
    progress = Progress(tmp_path, total_steps=3000, frame_skip=1, start_step=1337)
    sums = {"loss": 0.0, "mean_q": 0.0, "mean_abs_td_error": 0.0, "mean_weight": 0.0}
    state = {
        "event_files": {},
        "returns": [],
        "period_start": 1250,
        "sums": sums,
        "max_weight": 0.0,
        "updates": 0,
    }
    progress.load_state_dict(state)
    time.sleep(0.01)
    shown = str(progress.bar)
    progress.close()
    assert shown.startswith(" 42%|") and "1250/3000" in shown
    assert re.search(r"-\d", shown) is None, shown
