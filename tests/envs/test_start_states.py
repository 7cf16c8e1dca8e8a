"""Start-state files and sampling from trajectories, on real ALE games; exact expectations."""

import json
import zipfile

import ale_py
import numpy as np
import pytest

from envs.atari import make_env
from envs.frame_stack import FrameStack
from envs.start_states import load_start_states, rom_md5, save_start_states
from envs.trajectories import (
    Trajectory,
    TrajectoryLog,
    _draw,
    agent_frames,
    load_trajectories,
    replay_env,
    sample_start_states,
    save_trajectories,
)

STEPS = 250  # agent steps of 4 frames: 1,000 frames of Pong, long enough for a point or two


@pytest.fixture(scope="module")
def recording():
    """A game played through make_env (no no-ops) with random actions, logged as ALE action ids
    held for 4 frames, with the acting states FrameStack built along the way."""
    env = make_env("pong", seed=0, noop_max=0)
    minimal = [a.value for a in env.unwrapped.ale.getMinimalActionSet()]
    choices = np.random.default_rng(0).integers(0, len(minimal), STEPS)
    stack, score = FrameStack(), 0.0
    frame, _ = env.reset(seed=0)
    states = [stack.reset(frame)]
    for choice in choices:
        frame, reward, *_ = env.step(int(choice))
        score += reward
        states.append(stack.push(frame))
    trajectory = Trajectory(tuple(minimal[c] for c in choices), seed=0, score=score, source="rnd")
    return TrajectoryLog("pong", (trajectory,), frames_per_action=4), states


@pytest.fixture(scope="module")
def starts(recording):
    return sample_start_states(recording[0], rng=np.random.default_rng(3), count=24)


def direct_replay(log, frames):
    """Screens (RGB) and cumulative score after 0..frames emulator frames, replayed by hand."""
    env = replay_env(log.game)
    env.reset(seed=log.trajectories[0].seed)
    ale = env.unwrapped.ale
    actions = np.repeat(log.trajectories[0].actions, log.frames_per_action)
    screens, scores, score = [ale.getScreenRGB()], [0.0], 0.0
    for action in actions[:frames]:
        score += ale.act(int(action))
        screens.append(ale.getScreenRGB())
        scores.append(score)
    env.close()
    return screens, scores


def test_samples_are_distinct_sorted_frames_of_the_trajectory(starts):
    frames = starts.episode_frames
    assert len(starts) == 24 and len(set(frames.tolist())) == 24
    assert (np.diff(frames) > 0).all() and frames.min() >= 0 and frames.max() < 4 * STEPS
    assert (starts.trajectory_frames == frames).all() and (starts.trajectory_indices == 0).all()
    assert starts.trajectory_sources == ("rnd",)


def test_stored_frames_are_the_acting_state_make_env_and_frame_stack_built(recording, starts):
    _, states = recording
    aligned = [i for i, k in enumerate(starts.episode_frames) if k % 4 == 0]
    assert len(aligned) >= 4
    for i in aligned:
        assert np.array_equal(starts.frames[i], states[starts.episode_frames[i] // 4])


def test_a_restored_start_continues_exactly_like_the_recording(recording, starts):
    log, _ = recording
    screens, scores = direct_replay(log, 4 * STEPS)
    actions = np.repeat(log.trajectories[0].actions, 4)
    env = make_env("pong", seed=5)  # its reset plays no-ops first: the restore overrides them
    ale = env.unwrapped.ale
    for i in (0, 7, 23):
        k = int(starts.episode_frames[i])
        assert np.array_equal(starts.screens[i], screens[k])  # the screen it was recorded from
        assert starts.prefix_scores[i] == scores[k]
        env.reset()
        ale.restoreState(starts.ale_state(i))
        assert ale.getEpisodeFrameNumber() == k
        for frame in range(k, min(k + 40, 4 * STEPS)):
            ale.act(int(actions[frame]))
            assert np.array_equal(ale.getScreenRGB(), screens[frame + 1])


def test_agent_frames_pool_two_screens_and_pad_with_zeros():
    screens = {j: np.full((210, 160), 10 * j, np.uint8) for j in range(8)}
    state = agent_frames(screens.__getitem__, 6, frame_skip=4, history_length=3, screen_size=84)
    assert state.shape == (3, 84, 84) and state.dtype == np.uint8
    assert (state[0] == 0).all()  # frame -2: before the game
    assert (state[1] == 20).all()  # frame 2: max(screens 1, 2)
    assert (state[2] == 60).all()  # frame 6: max(screens 5, 6)
    single = agent_frames(screens.__getitem__, 0, frame_skip=4, history_length=2, screen_size=84)
    assert (single[1] == 0).all() and (single[0] == 0).all()  # the reset screen alone: 0


def test_save_and_load_round_trip(tmp_path, starts):
    path = tmp_path / "pong.npz"
    save_start_states(path, starts)
    loaded = load_start_states(path, game="Pong")
    assert loaded.states == starts.states and loaded.game == "pong"
    assert (loaded.rom_md5, loaded.ale_py_version) == (rom_md5("pong"), ale_py.__version__)
    for name in ("frames", "screens", "episode_frames", "prefix_scores", "trajectory_indices"):
        assert np.array_equal(getattr(loaded, name), getattr(starts, name)), name
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind
    with zipfile.ZipFile(path) as archive:  # plain arrays only, no pickled objects
        assert all(name.endswith(".npy") for name in archive.namelist())


def rewrite(source, target, metadata_changes=None, array_changes=None):
    """Copy a start-state file with edited metadata and/or arrays (the checksum is kept)."""
    with np.load(source, allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    metadata = json.loads(str(arrays["metadata"]))
    metadata.update(metadata_changes or {})
    arrays.update(array_changes or {})
    arrays["metadata"] = np.array(json.dumps(metadata))
    np.savez_compressed(target, **arrays)
    return target


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"game": "breakout"}, r"was made with a breakout ROM of MD5 [0-9a-f]+, the installed"),
        ({"rom_md5": "0" * 32}, r"was made with a pong ROM of MD5 0{32}, the installed ROM has"),
        ({"ale_py_version": "0.8.1"}, r"was made with ale-py 0.8.1, this is ale-py"),
        ({"format": "something-else"}, r"is not a start-state file"),
        ({"version": 7}, r"has version 7; this code reads version 1"),
        ({"game": "pongg"}, r"names an unknown game 'pongg'"),
    ],
)
def test_a_mismatched_file_is_refused_in_one_line(tmp_path, starts, edit, message):
    save_start_states(tmp_path / "good.npz", starts)
    bad = rewrite(tmp_path / "good.npz", tmp_path / "bad.npz", edit)
    with pytest.raises(ValueError, match=message) as error:
        load_start_states(bad)
    assert "\n" not in str(error.value) and "bad.npz" in str(error.value)


def test_another_games_file_is_refused(tmp_path, starts):
    save_start_states(tmp_path / "pong.npz", starts)
    with pytest.raises(ValueError, match=r"pong.npz is for game 'pong', not 'breakout'$"):
        load_start_states(tmp_path / "pong.npz", game="ALE/Breakout-v5")


def test_a_corrupted_file_is_refused_in_one_line(tmp_path, starts):
    good = tmp_path / "good.npz"
    save_start_states(good, starts)
    data = good.read_bytes()
    flipped = tmp_path / "flipped.npz"
    middle = len(data) // 2
    flipped.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(data[: len(data) // 3])
    text = tmp_path / "text.npz"
    text.write_text("not a zip")
    tampered_frames = starts.frames.copy()
    tampered_frames[0, 0, 0, 0] ^= 1
    tampered = rewrite(good, tmp_path / "tampered.npz", array_changes={"frames": tampered_frames})
    for path in (flipped, truncated, text, tampered, tmp_path / "missing.npz"):
        with pytest.raises(ValueError, match=f"start-state file {path}") as error:
            load_start_states(path)
        assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="does not match its checksum"):
        load_start_states(tampered)


def test_sampling_is_uniform_over_all_frames_of_all_trajectories():
    log = TrajectoryLog(
        "pong", (Trajectory((0,) * 750), Trajectory((0,) * 250)), frames_per_action=4
    )
    owners, frames = _draw(log, 400, np.random.default_rng(0), max_episode_frames=108_000)
    assert 270 <= (owners == 0).sum() <= 330  # 3/4 of the 4,000 candidate frames
    assert frames[owners == 0].max() < 3000 and frames[owners == 1].max() < 1000
    picks = set(zip(owners.tolist(), frames.tolist(), strict=True))
    assert len(picks) == 400  # without replacement
    owners, frames = _draw(log, 100, np.random.default_rng(0), max_episode_frames=500)
    assert frames.max() < 500  # a start must leave frames to play before the cap
    with pytest.raises(ValueError, match=r"count=1001 is not allowed: .* 1000 candidate frames"):
        _draw(log, 1001, np.random.default_rng(0), max_episode_frames=500)


def test_trajectory_file_round_trip_and_refusals(tmp_path, recording):
    log, _ = recording
    path = tmp_path / "log.json"
    save_trajectories(path, log)
    assert load_trajectories(path) == log
    document = json.loads(path.read_text())
    cases = [
        ({"trajectories": [{"actions": [0, 18]}]}, r"trajectories\[0\]\.actions must be"),
        ({"rom_md5": "f" * 32}, "rom_md5 must be the installed ROM's"),
        ({"frames_per_action": 0}, "frames_per_action must be a positive integer"),
        ({"game": "nope"}, "game must be a known Atari game"),
    ]
    for change, message in cases:
        (tmp_path / "bad.json").write_text(json.dumps({**document, **change}))
        with pytest.raises(ValueError, match=message):
            load_trajectories(tmp_path / "bad.json")


def test_a_replay_that_diverges_from_its_log_is_refused(recording):
    log, _ = recording
    wrong = TrajectoryLog("pong", (Trajectory(log.trajectories[0].actions, 0, 5.0),), 4)
    with pytest.raises(ValueError, match=r"trajectory 0 replays to score -?\d.*, its log says 5"):
        sample_start_states(wrong, rng=np.random.default_rng(0), count=2)
