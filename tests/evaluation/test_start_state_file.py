"""Start-state files and sampling from trajectories, on real ALE games; exact expectations."""

import json
import zipfile

import ale_py
import numpy as np
import pytest

import evaluation.human_starts.__main__ as start_state_tools
from envs.atari import make_env
from envs.frame_stack import FrameStack
from evaluation.human_starts import verification
from evaluation.human_starts.sampling import agent_frames, draw_frames, sample_start_states
from evaluation.human_starts.start_state_file import (
    digest,
    load_start_states,
    restore_start,
    save_start_states,
)
from evaluation.human_starts.trajectories import (
    Trajectory,
    TrajectoryLog,
    load_trajectories,
    replay_env,
    rom_md5,
    save_trajectories,
)
from evaluation.human_starts.verification import verify_start_states

STEPS = 250  # agent steps of 4 frames: 1,000 frames of Pong, long enough for a point or two


@pytest.fixture(scope="module")
def recording():
    """A game played through make_env (no no-ops) with random actions, logged as ALE action ids
    held for 4 frames, with the acting states FrameStack built along the way."""
    env = make_env("pong", seed=0, noop_max=0)
    minimal = [a.value for a in env.unwrapped.ale.getMinimalActionSet()]
    choices = np.random.default_rng(0).integers(0, len(minimal), STEPS)
    stack, score = FrameStack(4, (84, 84)), 0.0
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
    return sample_start_states(
        recording[0], rng=np.random.default_rng(3), count=24, **start_state_tools.layout_defaults()
    )


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
        restore_start(ale, starts, i)
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
    names = ("frames", "screens", "episode_frames", "prefix_scores", "trajectory_indices", "rams")
    for name in (*names, "trajectory_seeds"):
        assert np.array_equal(getattr(loaded, name), getattr(starts, name)), name
    assert loaded.trajectory_actions == starts.trajectory_actions
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind
    with zipfile.ZipFile(path) as archive:  # plain arrays only, no pickled objects
        assert all(name.endswith(".npy") for name in archive.namelist())


def test_the_file_layout_is_the_documented_one(tmp_path, starts):
    """Files already written stay readable only while the header and arrays are these."""
    save_start_states(tmp_path / "pong.npz", starts)
    with np.load(tmp_path / "pong.npz", allow_pickle=False) as npz:
        names = set(npz.files)
        metadata = json.loads(str(npz["metadata"]))
    assert names == {
        *("frames", "rams", "screens", "episode_frames", "prefix_scores"),
        *("trajectory_indices", "trajectory_frames", "trajectory_seeds"),
        *("state_bytes", "state_offsets", "action_bytes", "action_offsets", "metadata"),
    }
    assert (metadata["format"], metadata["version"]) == ("per-atari-start-states", 2)
    assert set(metadata) == {
        *("format", "version", "game", "rom_md5", "ale_py_version", "frame_skip"),
        *("screen_size", "history_length", "trajectory_sources", "sha256"),
    }


def rewrite(source, target, metadata_changes=None, array_changes=None, resign=False):
    """Copy a start-state file with edited metadata and/or arrays; the checksum is kept, or
    computed anew with ``resign`` (a deliberate edit that only verification can catch)."""
    with np.load(source, allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    metadata = json.loads(str(arrays["metadata"]))
    metadata.update(metadata_changes or {})
    arrays.update(array_changes or {})
    if resign:
        metadata["sha256"] = digest(arrays)
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
        (
            {"version": 1},
            r"has format version 1; this version of the application reads version 2; "
            r"regenerate it with ",
        ),
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
    owners, frames = draw_frames(log, 400, np.random.default_rng(0), max_episode_frames=108_000)
    assert 270 <= (owners == 0).sum() <= 330  # 3/4 of the 4,000 candidate frames
    assert frames[owners == 0].max() < 3000 and frames[owners == 1].max() < 1000
    picks = set(zip(owners.tolist(), frames.tolist(), strict=True))
    assert len(picks) == 400  # without replacement
    owners, frames = draw_frames(log, 100, np.random.default_rng(0), max_episode_frames=500)
    assert frames.max() < 500  # a start must leave frames to play before the cap
    with pytest.raises(ValueError, match=r"count=1001 is not allowed: .* 1000 candidate frames"):
        draw_frames(log, 1001, np.random.default_rng(0), max_episode_frames=500)


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
        sample_start_states(
            wrong, rng=np.random.default_rng(0), count=2, **start_state_tools.layout_defaults()
        )


# --- verification: prefixes that reach each start point, restores that go on like the replay --


@pytest.fixture
def unverified(monkeypatch):
    """Forget which start sets this process verified, so that the check really runs."""
    monkeypatch.setattr(verification, "_verified", set())


def test_a_pong_file_verifies_after_loading(tmp_path, starts, unverified):
    save_start_states(tmp_path / "pong.npz", starts)
    loaded = load_start_states(tmp_path / "pong.npz", game="pong")
    verify_start_states(loaded)  # replays the prefixes, restores, compares 1,000 frames each
    assert start_state_tools.main(["verify", str(tmp_path / "pong.npz")]) == 0


def edited(starts, name, index):
    """An array of ``starts`` with one element's bits flipped; actions stay legal ids."""
    if name == "action_bytes":
        blob = np.frombuffer(b"".join(starts.trajectory_actions), dtype=np.uint8).copy()
        frame = int(starts.trajectory_frames[index])
        blob[:frame] = np.where(blob[:frame] == 3, 4, 3)  # every prefix move the other way
        return blob
    array = getattr(starts, name).copy()
    array[index, 0] ^= 0xFF
    return array


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("action_bytes", r"start point \d+ \(frame \d+ of trajectory 0\) is not what its action "),
        (
            "rams",
            r"start point 20 \(frame \d+ of trajectory 0\) is not what its action prefix "
            r"reaches from reset\(seed=0\): its stored RAM differs; .* sample them again",
        ),
    ],
)
def test_a_tampered_prefix_or_ram_is_refused(tmp_path, starts, unverified, name, message):
    save_start_states(tmp_path / "good.npz", starts)
    bad = rewrite(
        tmp_path / "good.npz", tmp_path / "bad.npz", None, {name: edited(starts, name, 20)}, True
    )
    loaded = load_start_states(bad)  # the checksum fits: only verification can tell
    with pytest.raises(ValueError, match=message) as error:
        verify_start_states(loaded)
    assert "\n" not in str(error.value)


QBERT_MINIMAL = [0, 1, 2, 3, 4, 5]  # NOOP FIRE UP RIGHT LEFT DOWN


@pytest.fixture(scope="module")
def qbert_log():
    choices = np.random.default_rng(0).integers(0, len(QBERT_MINIMAL), 200)
    return TrajectoryLog("qbert", (Trajectory(tuple(QBERT_MINIMAL[c] for c in choices)),), 4)


def restore_right_after_reset(ale, starts, index):
    """restore_start without its NOOP frame: the state is restored right after reset(), as
    the evaluator did before version 2 (then the prefix's last frame is played as usual)."""
    ale.restoreState(ale_py.ALEState(starts.states[index]))
    frame = int(starts.episode_frames[index])
    if frame > 0:
        ale.act(int(starts.actions(int(starts.trajectory_indices[index]))[frame - 1]))


def test_qbert_restored_right_after_reset_is_refused_in_one_line(
    tmp_path, qbert_log, unverified, monkeypatch, capsys
):
    monkeypatch.setattr(verification, "restore_start", restore_right_after_reset)
    message = (
        r"qbert: start point \d+ \(frame \d+\) does not restore faithfully in ale-py 0\.12\.1: "
        r"the restored game's RAM left the replayed one 1 frame\(s\) after the restore"
    )
    with pytest.raises(ValueError, match=message):
        sample_start_states(
            qbert_log, rng=np.random.default_rng(0), count=3, **start_state_tools.layout_defaults()
        )
    save_trajectories(tmp_path / "qbert.json", qbert_log)
    out = tmp_path / "qbert.npz"
    assert start_state_tools.main(["sample", str(tmp_path / "qbert.json"), f"out={out}"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: qbert: start point ") and error.count("\n") == 1
    assert "cannot be evaluated from human starts" in error and not out.exists()


def test_qbert_restores_faithfully_after_one_frame_and_at_the_reset_itself(qbert_log, unverified):
    """restore_start plays one NOOP frame first, except for a start at frame 0: sampling (which
    verifies) succeeds both in mid-game and on every one of the first 8 frames."""
    starts = sample_start_states(
        qbert_log, rng=np.random.default_rng(0), count=6, **start_state_tools.layout_defaults()
    )
    assert starts.episode_frames.tolist() == [32, 215, 245, 407, 507, 676]
    opening = TrajectoryLog("qbert", (Trajectory(qbert_log.trajectories[0].actions[:2]),), 4)
    early = sample_start_states(
        opening, rng=np.random.default_rng(0), count=8, **start_state_tools.layout_defaults()
    )
    assert early.episode_frames.tolist() == list(range(8))


def test_a_file_of_pickled_objects_is_refused_without_advice_to_unpickle_it(tmp_path):
    """numpy's own text for pickled content recommends allow_pickle=True: loading code."""
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, metadata=np.array([{"format": "per-atari-start-states"}], dtype=object))
    with pytest.raises(ValueError) as error:
        load_start_states(pickled)
    assert str(error.value) == (
        f"start-state file {pickled} is corrupt or not a start-state file (ValueError)"
    )
