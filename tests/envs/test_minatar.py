"""envs.minatar: real MinAtar episodes through the TrainingEnv protocol."""

import numpy as np
import pytest

from artifacts.tensor_tree import to_numpy, to_tensors
from envs.minatar import GAMES, make_minatar_env, minatar_frame_shape, resolve_minatar_game
from envs.registry import build_env, env_settings

CHANNELS = {"asterix": 4, "breakout": 4, "freeway": 7, "seaquest": 10, "space_invaders": 6}
LEFT = 1  # MinAtar's action map: n, l, u, r, d, f


def play(env, actions) -> list[tuple]:
    """(frame bytes, reward, terminated, truncated, frame number) per step, resetting after
    each episode."""
    steps = []
    for action in actions:
        frame, reward, terminated, truncated, info = env.step(int(action))
        steps.append((frame.tobytes(), reward, terminated, truncated, info["episode_frame_number"]))
        if terminated or truncated:
            env.reset()
    return steps


def random_actions(count: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(6, size=count)


@pytest.mark.parametrize("game", GAMES)
def test_frames_are_channel_first_binary_uint8_of_the_games_shape(game):
    env = make_minatar_env(game, seed=0)
    frame, info = env.reset()
    assert frame.shape == env.observation_space.shape == minatar_frame_shape(game)
    assert frame.shape == (CHANNELS[game], 10, 10) and frame.dtype == np.uint8
    assert info == {"life_lost": False, "episode_frame_number": 0}
    assert env.action_space.n == 6
    seen = set()
    for _ in range(300):
        frame, reward, terminated, truncated, info = env.step(0)
        assert frame.shape == (CHANNELS[game], 10, 10) and frame.dtype == np.uint8
        assert not info["life_lost"] and not truncated
        seen |= set(np.unique(frame).tolist())
        if terminated:
            env.reset()
    assert seen == {0, 1}


@pytest.mark.parametrize("game", GAMES)
def test_a_seed_reproduces_episodes_and_another_seed_does_not(game):
    actions = random_actions(2000)
    first, second, other = (make_minatar_env(game, seed) for seed in (7, 7, 8))
    for env in (first, second, other):
        env.reset()
    reference = play(first, actions)
    assert play(second, actions) == reference
    assert play(other, actions) != reference


def test_episodes_end_and_rewards_are_the_games_unclipped_points():
    env = make_minatar_env("breakout", seed=0)
    env.reset()
    steps = play(env, random_actions(5000))
    ends = [frames for _, _, terminated, _, frames in steps if terminated]
    assert len(ends) >= 5  # a random paddle misses the ball
    assert {reward for _, reward, *_ in steps} == {0.0, 1.0}  # a point per brick


def test_sticky_actions_repeat_the_previous_action():
    """With probability 1 every step repeats the first action (no-op): the paddle never moves."""
    sticky, free = (
        make_minatar_env("breakout", seed=0, repeat_action_probability=p) for p in (1.0, 0.0)
    )
    paddle = 0  # breakout's channel of the paddle
    positions = {}
    for name, env in (("sticky", sticky), ("free", free)):
        frame, _ = env.reset()
        start = frame[paddle].copy()
        for _ in range(3):
            frame, *_ = env.step(LEFT)
        positions[name] = (start, frame[paddle])
    assert np.array_equal(*positions["sticky"])
    assert not np.array_equal(*positions["free"])


def test_frame_skip_repeats_the_action_and_sums_the_rewards():
    single, skipping = (make_minatar_env("freeway", seed=3, frame_skip=k) for k in (1, 2))
    single.reset(), skipping.reset()
    actions = random_actions(400, seed=1)
    singles = play(single, np.repeat(actions, 2))
    skips = play(skipping, actions)
    for index, (frame, reward, terminated, _, frames) in enumerate(skips):
        pair = singles[2 * index : 2 * index + 2]
        assert frame == pair[1][0] and reward == pair[0][1] + pair[1][1]
        assert frames == pair[1][4]
        if terminated:
            break


def test_the_frame_cap_truncates_after_the_step_that_reaches_it():
    env = make_minatar_env("freeway", seed=0, frame_skip=2, max_episode_frames=5)
    env.reset()
    results = [env.step(0)[2:] for _ in range(3)]
    assert [(terminated, truncated) for terminated, truncated, _ in results] == [
        (False, False),
        (False, False),
        (False, True),
    ]
    assert results[-1][2]["episode_frame_number"] == 6


@pytest.mark.parametrize("game", GAMES)
def test_a_restored_state_continues_exactly(game):
    """Captured mid-episode, written as a checkpoint holds it, restored into an env made with
    another seed: the same frames, rewards and ends as the original from then on."""
    env = make_minatar_env(game, seed=1)
    env.reset()
    play(env, random_actions(700, seed=2))
    saved = to_numpy(to_tensors(env.capture_state()))
    actions = random_actions(3000, seed=3)
    expected = play(env, actions)
    restored = make_minatar_env(game, seed=99)
    restored.reset()
    restored.restore_state(saved)
    assert play(restored, actions) == expected


def test_game_names_resolve_and_an_unknown_one_is_a_one_line_error():
    assert resolve_minatar_game("SpaceInvaders") == "space_invaders"
    assert resolve_minatar_game("MinAtar/Breakout-v0") == "breakout"
    with pytest.raises(ValueError) as error:
        resolve_minatar_game("pong")
    assert str(error.value) == (
        "env.game=pong is not allowed: MinAtar's games are asterix, breakout, freeway, "
        "seaquest, space_invaders"
    )


def test_the_registry_builds_it_from_the_config_section():
    env = build_env(env_settings({"kind": "minatar", "game": "seaquest", "frame_skip": 1}), seed=0)
    assert env.reset()[0].shape == (10, 10, 10)
    with pytest.raises(RuntimeError, match="no lives"):
        env.noops_after_life_loss()
