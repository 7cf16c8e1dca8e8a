"""Recording human play: the play() callback, and a real pygame session on a dummy display."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import ale_py
import numpy as np
import pytest

from evaluation.human_starts.__main__ import layout_defaults
from evaluation.human_starts.recording import (
    KeyboardRecorder,
    display_problem,
    record_trajectories,
)
from evaluation.human_starts.sampling import sample_start_states
from evaluation.human_starts.trajectories import load_trajectories, save_trajectories

ROOT = Path(__file__).resolve().parents[2]
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


def test_record_without_a_display_is_refused_in_one_line_and_writes_nothing(tmp_path):
    """SDL would complain, then wait for keys nobody can press."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER")
    }
    trajectories, out = tmp_path / "human.json", tmp_path / "starts.npz"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluation.human_starts",
            "record",
            "game=pong",
            f"trajectories={trajectories}",
            f"out={out}",
        ],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (result.returncode, result.stderr) == (
        2,
        "error: record needs a display a human plays on: no display (neither DISPLAY nor "
        "WAYLAND_DISPLAY is set)\n",
    )
    assert list(tmp_path.iterdir()) == []


def test_a_display_that_shows_nothing_is_no_display():
    assert display_problem({"DISPLAY": ":0", "SDL_VIDEODRIVER": "dummy"}, "linux") == (
        "SDL_VIDEODRIVER=dummy shows nothing"
    )
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}, "linux") is None
    assert display_problem({}, "darwin") is None


def fake_play(actions, then=None):
    """gymnasium's play, as if its frames had these actions (0: no key held); `then` runs
    after the frames, before the session ends."""

    def play(env, *, callback, **options):
        for action in actions:
            callback(None, None, action, 0.0, False, False, {})
        if then is not None:
            then()

    return play


@pytest.mark.parametrize(
    ("actions", "then", "message"),
    [
        (
            [0] * 50,
            None,
            "no key was pressed in 50 frames: nothing to record (start points come "
            "from a human playing)",
        ),
        (
            [0] * 5 + [3] * 5,
            lambda: os.kill(os.getpid(), signal.SIGTERM),
            "stopped by SIGTERM: the session (10 frames) is not saved",
        ),
    ],
    ids=["no key pressed", "SIGTERM"],
)
def test_a_session_without_human_input_or_stopped_by_a_signal_is_not_recorded(
    monkeypatch, actions, then, message
):
    gymnasium_play = pytest.importorskip("gymnasium.utils.play")  # needs pygame
    monkeypatch.setattr(gymnasium_play, "play", fake_play(actions, then))
    handler = signal.getsignal(signal.SIGTERM)
    with pytest.raises(ValueError) as refused:
        record_trajectories("pong", seed=0, max_frames=None, fps=0, zoom=1.0)
    assert str(refused.value) == message
    assert signal.getsignal(signal.SIGTERM) is handler  # handed back
