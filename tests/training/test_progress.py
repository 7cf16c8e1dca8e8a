"""The console progress bar of a resumed run."""

import re
import time

from training.progress import Progress


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
