"""The `TrainingEnv` contract of envs/registry.py, checked on every environment in
`envs.registry.ENVIRONMENTS`, built as train.py builds it from its config group
(configs/env/<kind>.yaml, at its default game) and played for real: an environment added to
the registry is checked unchanged. What only some kinds do (Atari's no-ops and lives, MinAtar's
sticky actions) is in their own test files."""

import functools
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from artifacts.tensor_tree import to_numpy, to_tensors
from envs.registry import ENVIRONMENTS, build_env, env_settings, environment_kind

CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")


@pytest.fixture(params=list(ENVIRONMENTS))
def kind(request) -> str:
    return request.param


@functools.cache
def config_section(kind: str) -> dict:
    """The env section of `python train.py env=<kind>`."""
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"env={kind}"])
    return OmegaConf.to_container(cfg.env, resolve=True)


def make(kind: str, seed: int, **settings):
    return build_env(env_settings({**config_section(kind), **settings}), seed=seed)


def random_actions(env, count: int, seed: int) -> list[int]:
    return np.random.default_rng(seed).integers(env.action_space.n, size=count).tolist()


def play(env, actions) -> list[tuple]:
    """(frame bytes, reward, terminated, truncated, info) per step, and (frame bytes, info) of
    the reset that follows each episode's end."""
    records = []
    for action in actions:
        frame, reward, terminated, truncated, info = env.step(action)
        records.append((frame.tobytes(), reward, terminated, truncated, info))
        if terminated or truncated:
            frame, info = env.reset()
            records.append((frame.tobytes(), info))
    return records


def assert_frame(env, kind: str, frame: np.ndarray) -> None:
    shape = tuple(environment_kind(kind).frame_shape(env_settings(config_section(kind))))
    assert frame.shape == shape == tuple(env.observation_space.shape)
    assert frame.dtype == np.uint8 == env.observation_space.dtype


def assert_info(info: dict) -> None:
    assert type(info["life_lost"]) is bool
    assert isinstance(info["episode_frame_number"], int) and info["episode_frame_number"] >= 0


def test_steps_return_the_kinds_frames_rewards_flags_and_info(kind):
    env = make(kind, seed=0, max_episode_frames=400)
    frame, info = env.reset()
    assert_frame(env, kind, frame)
    assert_info(info)
    assert info["life_lost"] is False
    assert env.action_space.n >= 1
    frame_number, ended = info["episode_frame_number"], 0
    for action in random_actions(env, 300, seed=1):
        frame, reward, terminated, truncated, info = env.step(action)
        assert_frame(env, kind, frame)
        assert_info(info)
        assert type(reward) is float and np.isfinite(reward)
        assert type(terminated) is bool and type(truncated) is bool
        assert info["episode_frame_number"] > frame_number  # every step plays frames
        frame_number = info["episode_frame_number"]
        if terminated or truncated:
            frame, info = env.reset()
            assert_frame(env, kind, frame)
            frame_number, ended = info["episode_frame_number"], ended + 1
    env.close()
    assert ended >= 1  # episodes ended within the frame cap, and the env reset


def test_a_seed_reproduces_its_episodes(kind):
    first, second = (make(kind, seed=7, max_episode_frames=300) for _ in range(2))
    reseeded = make(kind, seed=99, max_episode_frames=300)
    actions = random_actions(first, 400, seed=2)
    resets = [env.reset() for env in (first, second)] + [reseeded.reset(seed=7)]
    for frame, info in resets[1:]:
        np.testing.assert_array_equal(frame, resets[0][0])
        assert info == resets[0][1]
    expected = play(first, actions)
    assert play(second, actions) == expected
    assert play(reseeded, actions) == expected


def test_the_frame_cap_truncates_on_the_step_that_reaches_it_with_a_true_last_frame(kind):
    start = make(kind, seed=3).reset()[1]["episode_frame_number"]
    cap = start + 3  # the same seed starts its episode at the same frame
    capped, uncapped = make(kind, seed=3, max_episode_frames=cap), make(kind, seed=3)
    capped.reset()
    uncapped.reset()
    results = []
    while not results or not (results[-1][2] or results[-1][3]):
        results.append(capped.step(0))
    for *_, terminated, truncated, info in results[:-1]:
        assert not terminated and not truncated and info["episode_frame_number"] < cap
    frame, reward, terminated, truncated, info = results[-1]
    assert truncated and not terminated and info["episode_frame_number"] >= cap
    for _ in results:  # the same steps without a cap: the truncated step's frame and reward
        uncapped_frame, uncapped_reward, *_ = uncapped.step(0)
    np.testing.assert_array_equal(frame, uncapped_frame)
    assert reward == uncapped_reward


def test_a_captured_state_continues_exactly_in_an_env_of_another_seed(kind):
    """Captured mid-episode, written as a checkpoint holds it, restored into an env reset as
    a resumed run resets it: the same frames, rewards, ends and resets from then on."""
    env = make(kind, seed=1, max_episode_frames=200)
    env.reset()
    play(env, random_actions(env, 150, seed=3))
    saved = to_numpy(to_tensors(env.capture_state()))
    actions = random_actions(env, 400, seed=4)
    expected = play(env, actions)
    restored = make(kind, seed=99, max_episode_frames=200)
    restored.reset(seed=99)
    restored.restore_state(saved)
    assert play(restored, actions) == expected


def test_the_kind_names_its_games(kind):
    environment = environment_kind(kind)
    game = config_section(kind)["game"]
    assert environment.game_id(environment.game_id(game)) == environment.game_id(game)
    with pytest.raises(ValueError, match="env.game"):
        environment.game_id("no_such_game")
