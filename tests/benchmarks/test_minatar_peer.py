"""benchmarks/minatar_peer.py's timing of the peer, with a stand-in for MinAtar's
examples/dqn.py (the real one is not shipped with its package): the window opens at the
warm-up's last update and the run stops at the window's end, with ε's decay set off."""

from pathlib import Path

import pytest
from minatar_peer import peer_frames_per_second

STAND_IN = """
FIRST_N_FRAMES = 100000
calls = []

def train(*args):
    calls.append(FIRST_N_FRAMES)

def dqn(env, replay_off, target_off, output_file_name):
    assert env.num_actions() > 0 and not replay_off and not target_off
    for _ in range({updates}):
        train(None, None, None, None)
"""


def stand_in(tmp_path: Path, updates: int) -> Path:
    path = tmp_path / "dqn.py"
    path.write_text(STAND_IN.format(updates=updates))
    return path


def record_module(seen: list):
    import importlib.util

    make = importlib.util.module_from_spec

    def recorded(spec):
        module = make(spec)
        seen.append(module)
        return module

    return recorded


def test_the_window_stops_the_peer_after_warmup_and_frames(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr("importlib.util.module_from_spec", record_module(seen))
    assert peer_frames_per_second(stand_in(tmp_path, 1000), frames=20, warmup=5) > 0
    (module,) = seen
    assert module.calls == [1] * 25  # ε at its final value from the first update; no more


def test_a_peer_that_ends_before_the_window_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="ended before 25 updates"):
        peer_frames_per_second(stand_in(tmp_path, 10), frames=20, warmup=5)
