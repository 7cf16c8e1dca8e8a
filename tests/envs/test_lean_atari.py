"""Real ALE episodes through make_lean_env; every expectation is exact. The paper's processing is
checked frame for frame against ``Reference``, written here from ale-py, numpy and OpenCV; the
behaviour make_env promises too is checked on both envs in tests/envs/test_atari.py."""

import cv2
import numpy as np
import pytest
from ale_py import ALEInterface, LoggerMode, roms

from envs.atari import make_env
from envs.lean_atari import make_lean_env

NOOP = 0


def luminance(rgb):
    """ITU-R BT.601 (0.299, 0.587, 0.114) in 15-bit fixed point, rounded to nearest."""
    r, g, b = (rgb[..., channel].astype(np.uint32) for channel in range(3))
    return ((9798 * r + 19235 * g + 3735 * b + 2**14) >> 15).astype(np.uint8)


def shrink(grey):
    return cv2.resize(grey, (84, 84), interpolation=cv2.INTER_AREA)


class Reference:
    """The Nature pipeline on its own emulator, seeded as gymnasium seeds ALE. ``screens`` are
    the RGB frames of the last call; ``paper()`` is the max of the last two, then luminance,
    ``old_order()`` luminance, then the max (make_env's). A call that ends the game, or plays
    one frame, is observed from its last frame alone."""

    def __init__(self, game, seed):
        self.ale = ALEInterface()
        self.ale.setLoggerMode(LoggerMode.Error)
        self.ale.setFloat("repeat_action_probability", 0.0)
        ale_seed = np.random.SeedSequence(seed).generate_state(2)[1]
        self.ale.setInt("random_seed", int(ale_seed.astype(np.int32)))
        self.ale.loadROM(roms.get_rom_path(game))
        self.actions = self.ale.getMinimalActionSet()
        self.screens, self.over = [], False

    def reset(self, noops):
        self.ale.reset_game()
        self.play(0, noops)
        self.screens = [self.ale.getScreenRGB()]  # the last no-op frame alone
        return self.paper()

    def play(self, ale_action, frames):
        self.screens, reward, self.over = [], 0, False
        for _ in range(frames):
            reward += self.ale.act(ale_action)
            self.screens.append(self.ale.getScreenRGB())
            if self.ale.game_over():
                self.over = True
                break
        return reward

    def _pair(self):
        return self.screens[-1:] if self.over else self.screens[-2:]

    def paper(self):
        return shrink(luminance(np.maximum.reduce(self._pair())))

    def old_order(self):
        return shrink(np.maximum.reduce([luminance(screen) for screen in self._pair()]))


def run(env, actions):
    return [env.step(int(a)) for a in actions]


def assert_same_step(result, reference, reward):
    obs, got_reward, terminated, truncated, info = result
    np.testing.assert_array_equal(obs, reference.paper())
    assert (got_reward, terminated, truncated) == (reward, reference.over, False)
    assert info["lives"] == reference.ale.lives()
    assert info["episode_frame_number"] == reference.ale.getEpisodeFrameNumber()


@pytest.mark.parametrize(("game", "seed", "steps"), [("pong", 0, 200), ("breakout", 1, 250)])
def test_every_observation_is_the_papers_pipeline(game, seed, steps):
    """Random play with the training loop's calls: no-ops after each lost life, a reset after
    each game over (Breakout's run has both, and a game over in the middle of a skip). Rewards
    are ALE's unclipped sums; ``info`` is ALE's lives and frame count."""
    env, reference = make_lean_env(game, seed), Reference(game, seed)
    rng, events = np.random.default_rng(seed), {"lost": 0, "over": 0, "mid_skip": 0}
    obs, info = env.reset()
    np.testing.assert_array_equal(obs, reference.reset(info["episode_frame_number"]))
    for _ in range(steps):
        action = int(rng.integers(env.action_space.n))
        result = env.step(action)
        assert_same_step(result, reference, reference.play(reference.actions[action], 4))
        terminated, info = result[2], result[4]
        if info["life_lost"] and not terminated:
            events["lost"] += 1
            before = info["episode_frame_number"]
            obs, terminated, info = env.noops_after_life_loss()
            reference.play(0, info["episode_frame_number"] - before)
            np.testing.assert_array_equal(obs, reference.paper())
            assert terminated == reference.over
        if terminated:
            events["over"] += 1
            events["mid_skip"] += len(reference.screens) < 4
            obs, info = env.reset()
            np.testing.assert_array_equal(obs, reference.reset(info["episode_frame_number"]))
    if game == "breakout":
        assert min(events.values()) >= 1, events


def test_same_seed_is_make_envs_emulator_and_only_the_pooling_order_differs():
    """One seed gives make_env's no-op count, emulator, rewards and infos; the observations are
    the paper's order here and luminance-then-max there, and the two differ on some steps, so
    the frame-for-frame test above would catch the old order."""
    lean, today, reference = make_lean_env("pong", 0), make_env("pong", 0), Reference("pong", 0)
    (obs, info), (obs_today, info_today) = lean.reset(), today.reset()
    assert lean.ale.getInt("random_seed") == today.unwrapped.ale.getInt("random_seed")
    assert info == {key: info_today[key] for key in info}
    np.testing.assert_array_equal(obs, obs_today)  # a lone frame: no pooling, same grey
    reference.reset(info["episode_frame_number"])
    rng, order_mattered = np.random.default_rng(0), 0
    for _ in range(100):
        action = int(rng.integers(6))
        step, step_today = lean.step(action), today.step(action)
        reference.play(reference.actions[action], 4)
        assert step[1:4] == step_today[1:4]
        assert step[4] == {key: step_today[4][key] for key in step[4]}
        np.testing.assert_array_equal(lean.ale.getRAM(), today.unwrapped.ale.getRAM())
        np.testing.assert_array_equal(step[0], reference.paper())
        np.testing.assert_array_equal(step_today[0], reference.old_order())
        order_mattered += not np.array_equal(step[0], step_today[0])
    assert order_mattered > 0


def test_opencv_luminance_is_bt601_rounded_in_15_bit_fixed_point_on_every_colour():
    """The env converts with cv2.cvtColor; ``luminance`` is its documented formula, which is
    within 0.51 grey levels of 0.299 R + 0.587 G + 0.114 B (rounding, plus < 0.01)."""
    levels = np.arange(256, dtype=np.uint32)
    red, green, blue = np.meshgrid(np.arange(16, dtype=np.uint32), levels, levels, indexing="ij")
    worst = 0.0
    for high in range(0, 256, 16):
        rgb = np.stack([red + high, green, blue], axis=-1).astype(np.uint8).reshape(-1, 256, 3)
        grey = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
        np.testing.assert_array_equal(grey, luminance(rgb))
        exact = (299 * (red + high) + 587 * green + 114 * blue).reshape(grey.shape) / 1000
        worst = max(worst, float(np.abs(grey - exact).max()))
    assert 0.5 <= worst < 0.51


def test_frames_actions_and_emulator_settings_are_make_envs():
    env = make_lean_env("ALE/Breakout-v5", seed=0)  # the v5 default would be sticky 0.25
    obs, info = env.reset()
    assert obs.shape == (84, 84) and obs.dtype == np.uint8 and obs.any()
    assert env.observation_space.shape == (84, 84) and env.observation_space.dtype == np.uint8
    assert set(info) == {"lives", "life_lost", "episode_frame_number"}
    assert isinstance(env.step(NOOP)[1], float)
    assert env.unwrapped.ale is env.ale  # what the evaluator restores start points into
    assert env.ale.getFloat("repeat_action_probability") == 0.0
    assert env.ale.getInt("frame_skip") == 1 and env.ale.getInt("max_num_frames_per_episode") == 0
    sticky = make_lean_env("breakout", seed=0, repeat_action_probability=0.25)
    assert sticky.ale.getFloat("repeat_action_probability") == 0.25
    assert [make_lean_env(game, seed=0).action_space.n for game in ("pong", "breakout")] == [6, 4]
    assert make_lean_env("pong", seed=0, full_action_space=True).action_space.n == 18


def episode(seed, actions):
    """Breakout from a reset until game over or the actions run out, then the next reset."""
    env = make_lean_env("breakout", seed=seed)
    record = [env.reset()]
    for action in actions:
        record.append(env.step(int(action)))
        if record[-1][2]:
            break
    return record + [env.reset()]


def assert_same_records(first, second):
    for entry, again in zip(first, second, strict=True):
        np.testing.assert_array_equal(entry[0], again[0])
        assert entry[1:] == again[1:]


def test_same_seed_same_episode_different_seed_differs():
    actions = np.random.default_rng(0).integers(0, 4, size=200)
    first = episode(5, actions)
    assert_same_records(first, episode(5, actions))
    explicit = make_lean_env("breakout", seed=99).reset(seed=5)  # overrides the built-in seed
    assert_same_records(first[:1], [explicit])
    # make_env's no-op counts (29 and 22: Breakout's play depends on them modulo 4 only).
    other = episode(0, actions)
    assert (first[0][1]["episode_frame_number"], other[0][1]["episode_frame_number"]) == (29, 22)
    assert len(other) != len(first) or any(
        not np.array_equal(entry[0], again[0]) for entry, again in zip(first, other, strict=True)
    )


def test_bad_arguments_are_value_errors():
    with pytest.raises(ValueError, match="unknown game 'brekout'"):
        make_lean_env("brekout", seed=0)
    for key, value, allowed in (
        ("frame_skip", 0, "a positive integer"),
        ("noop_max", -1, "an integer >= 0"),
        ("max_episode_frames", -1, "an integer >= 0"),
    ):
        with pytest.raises(ValueError) as error:
            make_lean_env("pong", seed=0, **{key: value})
        assert str(error.value) == f"env.{key}={value} is not allowed: must be {allowed}"


def play_on(env, actions):
    """The loop's calls (step; no-ops after a lost life; reset after a game over), recorded;
    a step's record holds how many frames it played."""
    record = []
    for action in actions:
        before = env.ale.getEpisodeFrameNumber()
        obs, reward, terminated, _, info = env.step(int(action))
        record.append((obs, reward, terminated, info, info["episode_frame_number"] - before))
        if info["life_lost"] and not terminated:
            obs, terminated, info = env.noops_after_life_loss()
            record.append((obs, terminated, info))
        if terminated:
            record.append(env.reset())
    return record


def test_a_restored_env_continues_identically_through_noops_and_resets():
    """The no-op generator and the lives seen last are part of the state: a restored env plays
    the same no-op counts after lost lives and at the next reset, and the same frames, into a
    game over in the middle of a skip (its frame is the game-over frame: no buffer to restore)."""
    env, actions = make_lean_env("breakout", seed=2), np.random.default_rng(2).integers(4, size=250)
    env.reset()
    run(env, actions[:50])
    state = env.capture_state()
    assert all(type(value) in (bytes, dict, int) for value in state.values())
    first = play_on(env, actions)
    resumed = make_lean_env("breakout", seed=7)
    resumed.reset(seed=7)
    resumed.restore_state(state)
    second = play_on(resumed, actions)
    assert any(len(entry) == 5 and entry[2] and entry[4] < 4 for entry in first)
    assert_same_records(first, second)
