"""The no-op and human-starts protocols on real ALE episodes (Pong, short caps)."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from agents.policy import EpsilonGreedy
from envs.atari import make_env
from evaluation.human_starts.__main__ import layout_defaults
from evaluation.human_starts.sampling import sample_start_states
from evaluation.human_starts.start_state_file import restore_start
from evaluation.human_starts.trajectories import Trajectory, TrajectoryLog, replay_env
from evaluation.protocols import episode_listener, evaluate_human_starts, evaluate_noop

NOOP, FRAME_SKIP = 0, 4


class ScriptedPolicy:
    """EpsilonGreedy's rule around a constant greedy action; records every call."""

    history_length = 4

    def __init__(self, greedy=NOOP, num_actions=6):
        self.greedy, self.num_actions = greedy, num_actions
        self.calls = []  # (state, epsilon)

    def act(self, state, epsilon, rng=None):
        self.calls.append((state, epsilon))
        if rng.random() < epsilon:
            return int(rng.integers(self.num_actions))
        return self.greedy


class CountingNetwork:
    """Stands in for a Q-network: counts forward passes, always prefers action 0."""

    def __init__(self, num_actions):
        self.num_actions, self.calls = num_actions, 0

    def __call__(self, frames):
        self.calls += 1
        return torch.zeros((frames.shape[0], self.num_actions))


def test_noop_starts_play_1_to_30_noops_and_start_from_a_zero_padded_state():
    policy = ScriptedPolicy()
    result = evaluate_noop(
        policy,
        {"kind": "atari", "game": "pong", "max_episode_frames": 40},
        rng=np.random.default_rng(0),
        episodes=40,
    )
    assert len(result.scores) == 40 and not result.partial
    assert result.start_frames.min() >= 1 and result.start_frames.max() <= 30
    assert len(set(result.start_frames.tolist())) >= 15  # really random, not one fixed count
    first_state = policy.calls[0][0]
    assert (first_state[:3] == 0).all() and first_state[3].any()


def test_the_frame_cap_cuts_every_episode_and_counts_the_noops():
    policy = ScriptedPolicy()
    result = evaluate_noop(
        policy,
        {"kind": "atari", "game": "pong", "max_episode_frames": 200},
        rng=np.random.default_rng(1),
        episodes=3,
    )
    assert ((result.episode_frames >= 200) & (result.episode_frames <= 203)).all()
    steps = -(-(200 - result.start_frames) // FRAME_SKIP)  # ceil: the step that crosses the cap
    assert len(policy.calls) == steps.sum()
    assert result.emulated_frames == result.episode_frames.sum()


def test_each_episode_is_heard_as_it_ends_for_a_long_evaluations_progress():
    heard = []
    listening = episode_listener.set(heard.append)
    try:
        result = evaluate_noop(
            ScriptedPolicy(),
            {"kind": "atari", "game": "pong", "max_episode_frames": 40},
            rng=np.random.default_rng(0),
            episodes=3,
        )
    finally:
        episode_listener.reset(listening)
    assert heard == result.scores.tolist() and len(heard) == 3


def test_epsilon_is_passed_on_every_step_with_the_protocol_defaults():
    policy = ScriptedPolicy()
    evaluate_noop(
        policy,
        {"kind": "atari", "game": "pong", "max_episode_frames": 80},
        rng=np.random.default_rng(2),
    )
    assert {epsilon for _, epsilon in policy.calls} == {0.01}
    policy = ScriptedPolicy()
    evaluate_noop(
        policy,
        {"kind": "atari", "game": "pong", "max_episode_frames": 80},
        rng=np.random.default_rng(2),
        epsilon=0.3,
        episodes=2,
    )
    assert {epsilon for _, epsilon in policy.calls} == {0.3}


@pytest.mark.parametrize(
    ("epsilon", "low", "high"), [(0.0, 1.0, 1.0), (1.0, 0.0, 0.0), (0.5, 0.4, 0.6)]
)
def test_a_real_agent_explores_with_probability_epsilon_using_the_evaluation_rng(
    epsilon, low, high
):
    network, own_rng = CountingNetwork(6), np.random.default_rng(0)
    agent = EpsilonGreedy(network, torch.device("cpu"), 6, 4, rng=own_rng)
    own_stream = own_rng.bit_generator.state
    result = evaluate_noop(
        agent,
        {"kind": "atari", "game": "pong", "max_episode_frames": 400},
        rng=np.random.default_rng(3),
        epsilon=epsilon,
        episodes=1,
    )
    steps = -(-(400 - int(result.start_frames[0])) // FRAME_SKIP)
    assert low <= network.calls / steps <= high  # greedy steps use the network
    assert own_rng.bit_generator.state == own_stream  # training stream untouched


def test_the_same_rng_seed_gives_the_same_evaluation():
    kwargs = {"kind": "atari", "game": "pong", "max_episode_frames": 300}
    first, second = (
        evaluate_noop(
            ScriptedPolicy(), kwargs, rng=np.random.default_rng(7), epsilon=0.5, episodes=2
        )
        for _ in range(2)
    )
    assert np.array_equal(first.scores, second.scores)
    assert np.array_equal(first.episode_frames, second.episode_frames)


def test_a_frame_budget_keeps_completed_episodes_and_drops_the_cut_one():
    kwargs = {"kind": "atari", "game": "pong", "max_episode_frames": 300}
    result = evaluate_noop(ScriptedPolicy(), kwargs, rng=np.random.default_rng(4), max_frames=1000)
    assert len(result.scores) == 3 and not result.partial  # 3 x ~300 frames, the 4th is cut
    assert 1000 <= result.emulated_frames <= 1003
    assert result.emulated_frames > result.episode_frames.sum()  # the cut episode was played
    single = evaluate_noop(ScriptedPolicy(), kwargs, rng=np.random.default_rng(4), max_frames=150)
    assert len(single.scores) == 1 and single.partial  # none completed: the partial one counts
    assert 150 <= single.episode_frames[0] <= 153


def test_episodes_and_max_frames_are_exclusive():
    with pytest.raises(ValueError, match="give episodes or max_frames, not both"):
        evaluate_noop(
            ScriptedPolicy(),
            {"kind": "atari", "game": "pong"},
            rng=np.random.default_rng(0),
            episodes=1,
            max_frames=10,
        )


# --- human starts ---------------------------------------------------------------------------

HUMAN_FRAMES = 900  # the logged human game: 900 emulator frames of Pong


@pytest.fixture(scope="module")
def human():
    """A 'human' game (random actions held 4 frames) and 8 start points sampled from it."""
    choices = np.random.default_rng(0).integers(0, 6, HUMAN_FRAMES // 4)
    minimal = [0, 1, 3, 4, 11, 12]  # Pong's minimal action set as ALE ids
    log = TrajectoryLog("pong", (Trajectory(tuple(minimal[c] for c in choices)),), 4)
    return log, sample_start_states(log, rng=np.random.default_rng(1), count=8, **layout_defaults())


def expected_noop_continuation(log, start, cap, action=NOOP):
    """Replay the human log to ``start`` by hand, then ``action`` (an ALE id; NOOP unless
    given) in 4-frame steps until the frame number reaches ``cap``: (reward after the start,
    reward before it, final frame number)."""
    env = replay_env(log.game)
    env.reset(seed=0)
    ale = env.unwrapped.ale
    actions = np.repeat(log.trajectories[0].actions, 4)
    prefix = sum(ale.act(int(a)) for a in actions[:start])
    score = 0.0
    while ale.getEpisodeFrameNumber() < cap and not ale.game_over():
        score += sum(ale.act(action) for _ in range(FRAME_SKIP))
    env.close()
    return score, prefix, ale.getEpisodeFrameNumber()


def test_human_starts_score_only_after_the_start_and_cap_counts_the_prefix(human):
    log, starts = human
    cap = 1200
    policy = ScriptedPolicy(greedy=NOOP)
    result = evaluate_human_starts(
        policy,
        {"kind": "atari", "game": "pong", "max_episode_frames": cap},
        starts,
        rng=np.random.default_rng(0),
        epsilon=0.0,
    )
    assert np.array_equal(result.start_frames, starts.episode_frames)
    prefixes = []
    for i, start in enumerate(starts.episode_frames):
        score, prefix, end = expected_noop_continuation(log, int(start), cap)
        assert result.scores[i] == score and result.episode_frames[i] == end
        assert cap <= end <= cap + 3  # the cap counts the human prefix
        prefixes.append(prefix)
    assert any(p != 0 for p in prefixes)  # some starts come after points were scored
    assert result.emulated_frames == (result.episode_frames - result.start_frames).sum()


def test_human_starts_act_first_on_the_stored_frames_with_epsilon_0_001(human):
    _, starts = human
    policy = ScriptedPolicy()
    evaluate_human_starts(
        policy,
        {"kind": "atari", "game": "pong", "max_episode_frames": 1000},
        starts.first(2),
        rng=np.random.default_rng(0),
    )
    assert np.array_equal(policy.calls[0][0], starts.frames[0])
    assert {epsilon for _, epsilon in policy.calls} == {0.001}


@pytest.mark.parametrize(
    ("env_kwargs", "message"),
    [
        (
            {"kind": "atari", "game": "breakout"},
            r"start states have game='pong' but the evaluation uses "
            r"game='breakout'",
        ),
        (
            {"kind": "atari", "game": "pong", "frame_skip": 3},
            r"frame_skip=4 but the evaluation uses frame_skip=3",
        ),
        (
            {"kind": "atari", "game": "pong", "max_episode_frames": 100},
            r"at or past env.max_episode_frames=100",
        ),
        (
            {"kind": "atari", "game": "pong", "repeat_action_probability": 0.25},
            r"repeat_action_probability=0.25: set env.repeat_action_probability=0.0",
        ),
    ],
)
def test_start_states_that_do_not_fit_the_evaluation_are_refused(human, env_kwargs, message):
    with pytest.raises(ValueError, match=message):
        evaluate_human_starts(ScriptedPolicy(), env_kwargs, human[1], rng=np.random.default_rng(0))


def test_human_starts_on_qbert_play_on_exactly_like_the_human_game():
    """Q*bert is the game whose restores diverged right after reset() (benchmarks/
    restore_fidelity.py): with restore_start every episode scores what the replayed human game
    scores when the same actions follow (DOWN, index 5 of the minimal set and ALE id 5)."""
    choices = np.random.default_rng(0).integers(0, 6, 150)
    log = TrajectoryLog("qbert", (Trajectory(tuple(int(c) for c in choices)),), 4)
    starts = sample_start_states(log, rng=np.random.default_rng(2), count=3, **layout_defaults())
    cap, down = 1500, 5
    result = evaluate_human_starts(
        ScriptedPolicy(greedy=down),
        {"kind": "atari", "game": "qbert", "max_episode_frames": cap},
        starts,
        rng=np.random.default_rng(0),
        epsilon=0.0,
    )
    expected = [expected_noop_continuation(log, int(k), cap, down) for k in starts.episode_frames]
    assert result.scores.tolist() == [score for score, _, _ in expected]
    assert result.episode_frames.tolist() == [end for _, _, end in expected]
    assert result.scores.max() > 0  # the jumps down score


def test_start_points_that_fail_verification_are_refused_before_any_play(human):
    _, starts = human
    rams = starts.rams.copy()
    rams[0, 0] ^= 0xFF
    policy = ScriptedPolicy()
    with pytest.raises(ValueError, match=r"start point 0 .* its stored RAM differs"):
        evaluate_human_starts(
            policy,
            {"kind": "atari", "game": "pong", "max_episode_frames": 1000},
            replace(starts, rams=rams),
            rng=np.random.default_rng(0),
        )
    assert policy.calls == []


def test_make_env_restores_the_prefix_frame_number_after_its_own_noops(human):
    _, starts = human
    env = make_env("pong", seed=3)
    _, info = env.reset()
    assert 1 <= info["episode_frame_number"] <= 30
    restore_start(env.unwrapped.ale, starts, 5)
    *_, info = env.step(NOOP)
    assert info["episode_frame_number"] == starts.episode_frames[5] + FRAME_SKIP
