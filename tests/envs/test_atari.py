"""Real ALE episodes; every expectation is exact. The behaviour every Atari env promises is
checked on each env kind of the Atari family in the registry (`MAKERS`); the contract of every
env kind is tests/envs/test_env_contract.py's, and tests/envs/test_lean_atari.py checks what only
the lean one does."""

import cv2
import numpy as np
import pytest

from envs.atari import make_env
from envs.registry import ENVIRONMENTS, build_env, env_settings

NOOP = 0
ATARI_KINDS = [name for name, kind in ENVIRONMENTS.items() if kind.family == "atari"]


def maker(kind: str):
    """`make(game, seed, **settings)`: an env of `kind` as a run's env section builds it."""
    return lambda game, seed, **settings: build_env(
        env_settings({"kind": kind, "game": game, **settings}), seed
    )


MAKERS = pytest.mark.parametrize("make", [maker(name) for name in ATARI_KINDS], ids=ATARI_KINDS)


def run(env, actions):
    """Step through ``actions``; returns per-step (obs, reward, terminated, truncated, info)."""
    return [env.step(int(a)) for a in actions]


def test_observation_is_one_84x84_uint8_frame():
    env = make_env("pong", seed=0)
    obs, info = env.reset()
    assert obs.shape == (84, 84) and obs.dtype == np.uint8
    assert env.observation_space.shape == (84, 84) and env.observation_space.dtype == np.uint8
    obs, reward, terminated, truncated, info = env.step(NOOP)
    assert obs.shape == (84, 84) and obs.dtype == np.uint8
    assert isinstance(reward, float)
    assert obs.any()  # a real screen, not a blank buffer


@pytest.mark.parametrize(("game", "n_actions"), [("pong", 6), ("breakout", 4)])
def test_minimal_action_set(game, n_actions):
    env = make_env(game, seed=0)
    assert env.action_space.n == n_actions
    assert make_env(game, seed=0, full_action_space=True).action_space.n == 18


def test_no_sticky_actions_no_ale_frame_skip_no_ale_cap():
    env = make_env("ALE/Breakout-v5", seed=0)  # the v5 default would be sticky 0.25
    ale = env.unwrapped.ale
    assert ale.getFloat("repeat_action_probability") == 0.0
    assert ale.getInt("frame_skip") == 1
    assert ale.getInt("max_num_frames_per_episode") == 0
    sticky = make_env("breakout", seed=0, repeat_action_probability=0.25)
    assert sticky.unwrapped.ale.getFloat("repeat_action_probability") == 0.25


@MAKERS
def test_noops_are_single_frames_and_steps_are_frame_skip_frames(make):
    env = make("pong", seed=1)
    for _ in range(3):
        _, info = env.reset()
        noops = info["episode_frame_number"]
        assert 1 <= noops <= 30
        assert info["life_lost"] is False
        for k, (*_, info) in enumerate(run(env, [NOOP] * 5), start=1):
            assert info["episode_frame_number"] == noops + 4 * k
    env = make("pong", seed=1, frame_skip=3, noop_max=0)
    assert env.reset()[1]["episode_frame_number"] == 0
    assert env.step(NOOP)[4]["episode_frame_number"] == 3


@MAKERS
def test_noop_count_covers_exactly_1_to_noop_max(make):
    env = make("pong", seed=2, noop_max=3)
    counts = {env.reset()[1]["episode_frame_number"] for _ in range(40)}
    assert counts == {1, 2, 3}
    env = make("pong", seed=3)
    counts = [env.reset()[1]["episode_frame_number"] for _ in range(300)]
    assert set(counts) == set(range(1, 31))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@MAKERS
def test_frame_cap_truncates_on_the_step_that_reaches_it(make, seed):
    cap = 400
    env = make("pong", seed=seed, max_episode_frames=cap)
    _, info = env.reset()
    noops = info["episode_frame_number"]
    steps = -(-(cap - noops) // 4)  # first step whose last frame is at or past the cap
    results = run(env, [NOOP] * steps)
    for *_, terminated, truncated, info in results[:-1]:
        assert not terminated and not truncated
        assert info["episode_frame_number"] < cap
    *_, terminated, truncated, info = results[-1]
    assert truncated and not terminated
    assert info["episode_frame_number"] == noops + 4 * steps  # the last step is complete
    assert cap <= info["episode_frame_number"] < cap + 4
    # ...so its frame and reward are those of the same step without a cap: a true last frame.
    uncapped = make("pong", seed=seed, max_episode_frames=0)
    uncapped.reset()
    obs, reward, *_ = run(uncapped, [NOOP] * steps)[-1]
    np.testing.assert_array_equal(results[-1][0], obs)
    assert results[-1][1] == reward


@MAKERS
def test_life_lost_fires_exactly_when_lives_decrease_until_game_over(make):
    env = make("breakout", seed=4)
    _, info = env.reset()
    assert info["lives"] == 5 and info["life_lost"] is False
    lives, losses, terminated = info["lives"], 0, False
    while not terminated:
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        assert not truncated
        assert info["life_lost"] == (info["lives"] < lives)
        assert info["lives"] == lives - info["life_lost"]
        losses += info["life_lost"]
        if not terminated:
            assert info["lives"] > 0  # the game goes on after a life loss
        lives = info["lives"]
    assert losses == 5 and info["lives"] == 0


def test_rewards_are_unclipped_game_score():
    env = make_env("asterix", seed=0)
    env.reset()
    rewards = [r for _, r, *_ in run(env, [env.action_space.sample() for _ in range(100)])]
    assert max(rewards) >= 50.0
    assert all(r % 50 == 0 for r in rewards)


def test_same_seed_same_episode_different_seed_differs():
    actions = np.random.default_rng(0).integers(0, 4, size=200)

    def episode(seed):
        env = make_env("breakout", seed=seed)
        obs, info = env.reset()
        frames, rewards, infos = [obs], [], [info]
        for obs, reward, terminated, _, info in run(env, actions):
            frames.append(obs)
            rewards.append(reward)
            infos.append(info)
            if terminated:
                break
        second_reset = env.reset()
        return np.stack(frames), rewards, infos, second_reset

    frames_a, rewards_a, infos_a, reset_a = episode(5)
    frames_b, rewards_b, infos_b, reset_b = episode(5)
    np.testing.assert_array_equal(frames_a, frames_b)
    assert rewards_a == rewards_b and infos_a == infos_b
    np.testing.assert_array_equal(reset_a[0], reset_b[0])
    assert reset_a[1] == reset_b[1]
    # Breakout's play depends on the no-op count only modulo 4 (seed 5: 29 no-ops, seed 6: 21
    # give identical episodes), so compare with a seed whose count differs modulo 4 (22).
    frames_c, _, infos_c, _ = episode(0)
    assert (infos_a[0]["episode_frame_number"], infos_c[0]["episode_frame_number"]) == (29, 22)
    assert frames_c.shape != frames_a.shape or not np.array_equal(frames_c, frames_a)


def test_seed_applies_to_first_reset_and_explicit_seed_overrides():
    obs_a, info_a = make_env("pong", seed=3).reset()
    obs_b, info_b = make_env("pong", seed=99).reset(seed=3)
    np.testing.assert_array_equal(obs_a, obs_b)
    assert info_a["episode_frame_number"] == info_b["episode_frame_number"]


def test_ale_state_restore_is_exact_and_restores_the_frame_count():
    env = make_env("breakout", seed=7)
    env.reset()
    run(env, [1, 2, 3] * 5)
    ale = env.unwrapped.ale
    state = ale.cloneState()
    frame_number = ale.getEpisodeFrameNumber()
    first = run(env, [2, 3, 2, 3])
    run(env, [1] * 10)
    ale.restoreState(state)
    assert ale.getEpisodeFrameNumber() == frame_number
    second = run(env, [2, 3, 2, 3])
    for (obs_1, *_, info_1), (obs_2, *_, info_2) in zip(first[1:], second[1:], strict=True):
        # the first step after a restore max-pools with a frame from before it, so skip it
        np.testing.assert_array_equal(obs_1, obs_2)
        assert info_1["episode_frame_number"] == info_2["episode_frame_number"]


def test_unknown_game_is_a_value_error():
    with pytest.raises(ValueError, match="unknown game 'brekout'"):
        make_env("brekout", seed=0)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_captured_state_continues_exactly_into_a_game_over_mid_skip(seed):
    """A step that ends the game early in its frame skip returns a max over the frames of the
    step before, so the max-pooling buffer is part of the captured state."""
    env, rng = make_env("breakout", seed=seed), np.random.default_rng(seed)
    env.reset()
    while True:
        state, action = env.capture_state(), int(rng.integers(4))
        frames_before = env.unwrapped.ale.getEpisodeFrameNumber()
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated:
            break
    assert env.unwrapped.ale.getEpisodeFrameNumber() - frames_before < 4  # ended mid-skip
    resumed = make_env("breakout", seed=seed)
    resumed.reset(seed=seed)  # as a resumed run does before restoring
    resumed.restore_state(state)
    obs_2, reward_2, terminated_2, truncated_2, info_2 = resumed.step(action)
    np.testing.assert_array_equal(obs_2, obs)
    assert (reward_2, terminated_2, truncated_2, info_2) == (reward, terminated, truncated, info)


@MAKERS
def test_noops_after_a_life_loss_play_2_to_31_frames(make):
    """DeepMind's training rule: one no-op frame, then 1..noop_max more (Breakout never ends
    without FIRE, so every call continues the same game)."""
    env = make("breakout", seed=5)
    env.reset()
    counts = set()
    for _ in range(400):
        before = env.unwrapped.ale.getEpisodeFrameNumber()
        _, terminated, info = env.noops_after_life_loss()
        assert not terminated
        counts.add(info["episode_frame_number"] - before)
    env.close()
    assert counts == set(range(2, 32))


def test_noops_after_a_life_loss_pool_the_last_two_frames():
    env = make_env("breakout", seed=0, noop_max=1)  # exactly two no-op frames
    env.reset()
    ale = env.unwrapped.ale
    for _ in range(40):  # launch the ball, so that consecutive screens differ
        env.step(1)
    start = ale.cloneState()
    observation, _, _ = env.noops_after_life_loss()
    ale.restoreState(start)
    screens = []
    for _ in range(2):
        ale.act(0)
        screens.append(ale.getScreenGrayscale())
    env.close()
    assert not np.array_equal(screens[0], screens[1])
    expected = cv2.resize(np.maximum(*screens), (84, 84), interpolation=cv2.INTER_AREA)
    np.testing.assert_array_equal(observation, expected)
