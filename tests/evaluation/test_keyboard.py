"""Recording human play: the play() callback, and a real pygame session on a dummy display."""

import ale_py
import numpy as np
import pytest

from evaluation.human_starts.__main__ import layout_defaults
from evaluation.human_starts.recording import KeyboardRecorder, record_trajectories
from evaluation.human_starts.sampling import sample_start_states
from evaluation.human_starts.trajectories import load_trajectories, save_trajectories

RIGHT = 3  # ale_py.Action.RIGHT


def test_the_recorder_logs_ale_ids_and_splits_games():
    legal = [ale_py.Action.NOOP, ale_py.Action.FIRE, ale_py.Action.RIGHT]
    recorder = KeyboardRecorder(legal, seed=7, max_frames=None, source="kb")
    for action, reward, over in [
        (0, 0.0, False),
        (2, 1.0, False),
        (1, -1.0, True),
        (2, 3.0, False),
    ]:
        recorder(None, None, action, reward, over, False, {})
    recorder.finish()  # the session ended inside the second game: it is kept
    first, second = recorder.trajectories
    assert (first.actions, first.score, first.seed, first.source) == (
        (0, 3, 1),
        0.0,
        7,
        "kb game 0",
    )
    assert (second.actions, second.score, second.source) == ((3,), 3.0, "kb game 1")


# gymnasium's play module warns about its optional plotting helper; it is not used here.
@pytest.mark.filterwarnings("ignore:.*matplotlib is not installed")
def test_a_keyboard_session_on_a_dummy_display(monkeypatch, tmp_path):
    pygame = pytest.importorskip("pygame")
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    monkeypatch.setenv("SDL_AUDIODRIVER", "dummy")

    def press_d_from_frame_3_to_30(frame):
        if frame in (3, 30):
            kind = pygame.KEYDOWN if frame == 3 else pygame.KEYUP
            pygame.event.post(pygame.event.Event(kind, key=pygame.K_d))

    log = record_trajectories(
        "pong", seed=0, max_frames=60, fps=0, zoom=1.0, on_frame=press_d_from_frame_3_to_30
    )
    (game,) = log.trajectories
    # A key event acts from the next frame on: 3 no-ops, 27 x RIGHT, then no-ops to frame 60.
    assert game.actions == (0,) * 3 + (RIGHT,) * 27 + (0,) * 30
    save_trajectories(tmp_path / "human.json", log)
    starts = sample_start_states(
        load_trajectories(tmp_path / "human.json"),
        rng=np.random.default_rng(0),
        count=5,
        **layout_defaults(),
    )
    assert len(starts) == 5 and starts.episode_frames.max() < 60
