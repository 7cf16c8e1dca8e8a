"""train.py: config composition, validation, schedules and an in-process smoke run."""

import dataclasses
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import RunMode
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import train
from agents.double_dqn import optimizer_epsilon
from envs.registry import ENVIRONMENTS
from launch import run_guard
from launch.run_guard import check_machine, check_memory
from launch.validation import validate_config
from replay.registry import SAMPLERS
from training.checkpoints import CheckpointStore
from training.loop import StopRequest, Training, importance_exponent, linear_schedule
from training.run_record import RunRecord, config_record

CONFIGS = str(Path(__file__).resolve().parents[1] / "configs")
REPLAYS = tuple(SAMPLERS)  # every registered sampler, through its preset
# Every registered Atari env, under the paper's config and the demo preset.
ATARI_ENVS = [name for name, kind in ENVIRONMENTS.items() if kind.family == "atari"]


def config(*overrides: str):
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


@pytest.mark.parametrize(
    ("overrides", "game"),
    [
        (["env.game=SpaceInvaders"], "space_invaders"),
        (["env.game=ALE/MsPacman-v5"], "ms_pacman"),
        (["experiment=minatar_dqn", "env.game=SpaceInvaders"], "space_invaders"),
    ],
)
def test_the_default_run_directory_is_named_by_the_games_id(overrides, game):
    """However env.game spells it, a game's runs share one directory."""
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides, return_hydra_config=True)
    assert re.fullmatch(rf"runs/{game}/uniform/[\d_-]+", OmegaConf.select(cfg, "hydra.run.dir"))


def test_defaults_are_the_papers_uniform_double_dqn():
    cfg = config()
    assert cfg.env.game == "pong" and cfg.replay.kind == "uniform"
    assert cfg.train.total_steps * cfg.env.frame_skip == 200_000_000
    assert cfg.agent.learning_rate == 0.00025 and cfg.replay.capacity == 1_000_000
    assert (cfg.train.learning_start_steps, cfg.train.target_update_period_steps) == (
        50_000,
        30_000,
    )
    assert cfg.env.repeat_action_probability == 0.0 and cfg.env.noop_max == 30


@pytest.mark.parametrize(
    "kind,alpha,beta,lr",
    [("proportional", 0.6, 0.4, 0.00025 / 4), ("rank_based", 0.7, 0.5, 0.00025 / 4)],
)
def test_prioritized_presets_are_table_3(kind, alpha, beta, lr):
    cfg = config(f"replay={kind}")
    assert cfg.replay.priority_exponent == alpha and cfg.replay.importance_exponent == beta
    assert cfg.replay.importance_exponent_final == 1.0 and cfg.agent.learning_rate == lr


@pytest.mark.parametrize("env", ATARI_ENVS)
@pytest.mark.parametrize("replay", REPLAYS)
@pytest.mark.parametrize("experiment", [None, "demo"])
def test_every_config_composes_resolves_and_validates(replay, experiment, env):
    overrides = [f"replay={replay}", f"env={env}"]
    overrides += [f"experiment={experiment}"] if experiment else []
    cfg = config(*overrides)
    OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    validate_config(cfg)


def test_command_line_overrides_reach_the_replay_and_agent():
    cfg = config("replay=rank_based", "replay.priority_exponent=0.5", "agent.learning_rate=0.001")
    assert cfg.replay.priority_exponent == 0.5 and cfg.agent.learning_rate == 0.001


@pytest.mark.parametrize(
    "override,message",
    [
        ("replay.kind=sorted", "replay.kind=sorted is not allowed: must be one of uniform"),
        ("replay.capacity=16", "replay.capacity=16 is not allowed: must be at least"),
        ("train.learning_start_steps=8", "train.learning_start_steps=8 is not allowed"),
        ("replay.importance_exponent=1.5", "replay.importance_exponent=1.5 is not allowed"),
        ("env.game=pongg", "unknown game 'pongg'"),
    ],
)
def test_bad_settings_are_one_line_errors_naming_the_key(override, message):
    with pytest.raises(ValueError, match=message) as error:
        validate_config(config(override))
    assert "\n" not in str(error.value)


def test_a_gpu_the_machine_lacks_is_refused_in_one_line():
    with pytest.raises(ValueError, match="agent.device=.cuda:99. but") as error:
        check_machine(validate_config(config("agent.device=cuda:99")))  # also where a GPU is
    assert "\n" not in str(error.value)


def test_linear_schedule():
    assert linear_schedule(1.0, 0.01, 0, 100, 0) == 1.0
    assert linear_schedule(1.0, 0.0, 0, 100, 25) == 0.75
    assert linear_schedule(1.0, 0.01, 0, 100, 100) == 0.01
    assert linear_schedule(1.0, 0.01, 0, 100, 10**6) == 0.01
    assert linear_schedule(0.4, 1.0, 50, 150, 10) == 0.4
    assert linear_schedule(0.4, 1.0, 50, 150, 100) == pytest.approx(0.7)
    assert linear_schedule(0.4, 0.4, 10, 10, 10) == 0.4


SMOKE = (  # a short Breakout run with learning, a periodic test and small episodes
    "experiment=demo",
    "env.game=breakout",
    "train.learning_start_steps=100",
    "replay.capacity=300",
    "env.max_episode_frames=400",
    "evaluation.every_frames=800",
    "evaluation.frames=400",
)


def smoke_run(tmp_path, *overrides: str) -> train.Components:
    """Validate, build and run to the end in this process; returns the built components."""
    cfg = config(*SMOKE, *overrides)
    run = validate_config(cfg)
    parts = train.build(run)
    store = CheckpointStore(tmp_path / "checkpoints")
    record = RunRecord(tmp_path, config_record(cfg))
    training = Training(parts, run, tmp_path, store, StopRequest(), record)
    training.start(None)
    assert training.run() is None
    parts.env.close()
    return parts


@pytest.mark.parametrize("replay", REPLAYS)
def test_smoke_run_logs_every_scalar(replay, tmp_path):
    smoke_run(
        tmp_path,
        f"replay={replay}",
        "train.total_steps=400",
        "train.target_update_period_steps=100",
        "train.log_period_steps=100",
        "train.priority_histogram_period_steps=200",
    )
    events = EventAccumulator(str(tmp_path / "tensorboard")).Reload()
    tags = set(events.Tags()["scalars"])
    expected = {
        "episode/return",
        "episode/length_frames",
        "episode_vs_frames/return",
        "episode_vs_frames/length_frames",
        "train/loss",
        "train/mean_q",
        "train/mean_abs_td_error",
        "train/epsilon",
        "replay/size",
        "replay/importance_exponent",
        "replay/mean_weight",
        "replay/max_weight",
        "replay/max_priority",
        "speed/steps_per_second",
        "speed/frames_per_second",
        "replay_stats/mean_sampled_age",
        "replay_stats/evicted_unreplayed_fraction",
        "replay_stats/mean_replays_per_live_transition",
        "replay_stats/never_replayed_live_fraction",
    }
    assert expected <= tags
    # The periodic test evaluation ran every 200 steps and kept the best and latest snapshots.
    assert [e.step for e in events.Scalars("eval/score")] == [200, 400]
    assert {"eval/normalized_score", "eval_vs_frames/score"} <= tags
    assert (tmp_path / "agent_best.pt").exists() and (tmp_path / "agent_latest.pt").exists()
    assert [e.step for e in events.Scalars("train/epsilon")] == [100, 200, 300, 400]
    # Episodes are capped at 400 frames = 100 agent steps: four of them in 400 steps.
    assert len(events.Scalars("episode/return")) >= 3
    assert "replay/priorities" in events.Tags()["histograms"]
    assert {"replay/sorted_td_errors", "replay/replay_rate_by_td_error"} <= set(
        events.Tags()["images"]
    )
    assert (tmp_path / "agent_final.pt").exists()
    hparams = EventAccumulator(str(tmp_path / "tensorboard" / "hparams")).Reload()
    assert {"hparams/final_return", "hparams/best_eval_score"} <= set(hparams.Tags()["scalars"])


def test_a_replay_larger_than_the_memory_is_refused_before_allocating(monkeypatch):
    monkeypatch.setattr(run_guard, "available_memory", lambda: (10**9, ""))
    with pytest.raises(ValueError) as error:
        check_memory(validate_config(config()))
    assert str(error.value) == (
        "replay.capacity=1000000 is not allowed: a full replay needs 7.2 GB and this machine "
        "has 1.0 GB available"
    )


@pytest.mark.parametrize("replay", REPLAYS)
def test_every_key_of_every_replay_preset_is_known(replay):
    """Every key of a preset is a setting of its sampler's schema; one added with + is not."""
    validate_config(config(f"replay={replay}"))
    with pytest.raises(ValueError, match=r"^replay\.capcity is not a setting; replay has: "):
        validate_config(config(f"replay={replay}", "+replay.capcity=5"))


@pytest.mark.parametrize(
    "overrides",
    [
        ("replay.priority_exponent=2", "replay.priority_epsilon=1e-300"),
        ("replay.priority_exponent=1000",),
    ],
)
def test_priorities_that_would_underflow_are_refused(overrides):
    with pytest.raises(ValueError, match=r"priorities p\^α would underflow to 0 or overflow"):
        validate_config(config("replay=proportional", *overrides))


def test_the_lean_env_trains_and_tests_through_the_registry(tmp_path):
    parts = smoke_run(tmp_path, "env=lean_atari", "train.total_steps=200")
    assert type(parts.env).__name__ == "LeanAtariEnv"
    events = EventAccumulator(str(tmp_path / "tensorboard")).Reload()
    assert [e.step for e in events.Scalars("eval/score")] == [200]
    checkpoint = CheckpointStore(tmp_path / "checkpoints").read_latest()
    assert checkpoint["state"]["identity"]["env.kind"] == "lean_atari"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("graphs", [False, True])
@pytest.mark.parametrize("pipelined", [False, True])
def test_a_run_with_the_learner_and_the_frames_on_cuda(pipelined, graphs, tmp_path):
    parts = smoke_run(
        tmp_path,
        "agent.device=cuda",
        "replay.device=cuda",
        f"agent.pipelined={pipelined}",
        f"agent.cuda_graphs={graphs}",
        "replay=proportional",
        "train.total_steps=800",
        "train.log_period_steps=100",
    )
    storage = parts.replay.storage
    assert torch.equal(storage.device_frames.cpu(), torch.from_numpy(storage.frames))
    events = EventAccumulator(str(tmp_path / "tensorboard")).Reload()
    assert [e.step for e in events.Scalars("eval/score")] == [200, 400, 600, 800]
    losses = [e.value for e in events.Scalars("train/loss")]
    assert len(losses) == 8 and np.isfinite(losses).all()


MINATAR_PRESETS = ("minatar_dqn", "minatar_ddqn", "minatar_per_dqn")


@pytest.mark.parametrize("signal", ["td_error", "huber_loss", "td_error_change"])
@pytest.mark.parametrize("eviction", ["fifo", "lowest_priority"])
@pytest.mark.parametrize("replay", REPLAYS)
@pytest.mark.parametrize("preset", MINATAR_PRESETS)
def test_minatar_presets_compose_with_every_replay_kind_signal_and_eviction(
    preset, replay, eviction, signal
):
    overrides = [f"experiment={preset}", f"replay.eviction={eviction}"]
    overrides += [f"replay.priority_signal={signal}"]
    # The prioritized preset chooses its replay; any other kind on the command line wins.
    overrides += [] if preset == "minatar_per_dqn" and replay == "uniform" else [f"replay={replay}"]
    cfg = config(*overrides)
    validate_config(cfg)
    assert (cfg.env.kind, cfg.agent.network, cfg.agent.history_length) == ("minatar", "minatar", 1)
    assert cfg.agent.learning_rate == 0.00025  # uniform's, whatever the replay kind
    assert cfg.replay.importance_exponent_final_step == 5_000_000
    assert cfg.replay.capacity == 100_000 and cfg.train.reward_clip is None


def test_minatar_dqn_is_the_published_agent():
    cfg = config("experiment=minatar_dqn")
    agent, t = cfg.agent, cfg.train
    assert (agent.target_rule, agent.optimizer) == ("dqn", "torch_rmsprop")
    assert (agent.rmsprop_decay, agent.rmsprop_epsilon, agent.td_error_clip) == (0.95, 0.01, 1.0)
    assert (t.batch_size, t.update_period_steps, t.learning_start_steps) == (32, 1, 5_000)
    assert (t.target_update_period_steps, t.epsilon_final, t.epsilon_decay_steps) == (
        1_000,
        0.1,
        100_000,
    )
    assert t.total_steps * cfg.env.frame_skip == 1_000_000 and cfg.replay.kind == "uniform"
    assert (cfg.env.repeat_action_probability, cfg.env.difficulty_ramping) == (0.1, True)
    assert config("experiment=minatar_ddqn").agent.target_rule == "double_dqn"
    per = config("experiment=minatar_per_dqn").replay
    assert (per.kind, per.priority_exponent, per.importance_exponent) == ("proportional", 0.6, 0.4)
    assert (per.priority_signal, per.priority_epsilon, per.weight_normalization) == (
        "huber_loss",
        0.00001,
        "batch",
    )


def test_dopamine_dqn_is_dopamines_published_agent():
    """google/dopamine's dqn.gin, in the settings that change learning."""
    run = validate_config(config("experiment=dopamine_dqn"))
    agent, t, env = run.agent, run.train, run.env
    assert (agent.network, agent.target_rule, agent.learning_rate) == ("dopamine", "dqn", 0.00025)
    assert optimizer_epsilon(agent, t.batch_size) == pytest.approx(1e-5, rel=1e-12)  # in the root
    assert (t.learning_start_steps, t.update_period_steps, t.target_update_period_steps) == (
        20_000,
        4,
        8_000,
    )
    assert (t.epsilon_final, t.epsilon_decay_steps, t.life_loss) == (0.01, 250_000, "ignore")
    assert (env.repeat_action_probability, env.noop_max, env.max_episode_frames) == (
        0.25,
        0,
        108_000,
    )
    assert (run.evaluation.epsilon, run.replay.kind) == (0.001, "uniform")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ("experiment=minatar_dqn", "env.game=pong"),
            "env.game=pong is not allowed: MinAtar's games are asterix, breakout",
        ),
        (
            ("experiment=minatar_dqn", "agent.network=nature"),
            "agent.network=nature is not allowed here: the Nature network takes 84x84 frames, "
            "not (4, 10, 10)",
        ),
        (("env=minatar",), "agent.network=nature is not allowed here"),
        (
            ("experiment=minatar_dqn", "+env.noop_max=5"),
            "env.noop_max is not a setting; env has: difficulty_ramping, frame_skip, game, kind, "
            "max_episode_frames, repeat_action_probability",
        ),
        (("agent.target_rule=sarsa",), "agent.target_rule=sarsa is not allowed: must be one of"),
        (("train.reward_clip=0",), "train.reward_clip=0 is not allowed: must be null"),
        (
            ("replay=proportional", "replay.importance_exponent_final_step=0"),
            "replay.importance_exponent_final_step=0 is not allowed",
        ),
    ],
)
def test_settings_that_do_not_fit_the_env_are_one_line_errors(overrides, message):
    with pytest.raises(ValueError, match=re.escape(message)) as error:
        validate_config(config(*overrides))
    assert "\n" not in str(error.value)


def test_a_minatar_run_trains_tests_and_checkpoints(tmp_path):
    parts = smoke_run(
        tmp_path,
        "experiment=minatar_per_dqn",
        "env.game=asterix",
        "train.total_steps=600",
        "train.learning_start_steps=100",
        "train.target_update_period_steps=100",
        "train.log_period_steps=100",
        "replay.capacity=300",
        "evaluation.every_frames=300",
        "evaluation.frames=200",
        "checkpoint.every_steps=300",
    )
    assert type(parts.env).__name__ == "MinAtarEnv"
    assert parts.replay.storage.frames.shape == (300, 4, 10, 10)
    events = EventAccumulator(str(tmp_path / "tensorboard")).Reload()
    assert [e.step for e in events.Scalars("eval/score")] == [300, 600]
    assert "eval/normalized_score" not in events.Tags()["scalars"]  # no human reference
    assert [e.step for e in events.Scalars("train/loss")] == [100, 200, 300, 400, 500, 600]
    assert all(np.isfinite(e.value) for e in events.Scalars("train/loss"))
    checkpoint = CheckpointStore(tmp_path / "checkpoints").read_latest()
    assert checkpoint["step"] == 600 and checkpoint["state"]["identity"]["env.kind"] == "minatar"
    snapshot = torch.load(tmp_path / "agent_final.pt", weights_only=True)
    assert (snapshot["network"], snapshot["frame_shape"], snapshot["game"]) == (
        "minatar",
        [4, 10, 10],
        "asterix",
    )


@pytest.mark.parametrize("budget", ["budget_2m", "budget_10m", "budget_50m"])
@pytest.mark.parametrize("kind", ["proportional", "rank_based"])
def test_a_budget_runs_beta_is_the_papers_run_at_every_step(budget, kind):
    """A budget preset is the paper's run cut short: β at its step t is the paper's at t."""
    paper = validate_config(config(f"replay={kind}"))
    short = validate_config(config(f"experiment={budget}", f"replay={kind}"))
    assert paper.train.total_steps == 50_000_000 > short.train.total_steps
    end = short.train.total_steps
    for step in (0, 50_000, 50_001, 1_000_000, end // 2, end):
        assert importance_exponent(short, step) == importance_exponent(paper, step)
    assert importance_exponent(paper, paper.train.total_steps) == 1.0
    if budget == "budget_10m":  # 10M frames: 0.43 and 0.52, not 1
        expected = {"proportional": 0.4294, "rank_based": 0.5245}[kind]
        assert importance_exponent(short, end) == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize(("keep", "epsilon"), [(False, "9.765625e-06"), (True, "6.103515625e-07")])
def test_a_runs_config_yaml_names_the_epsilon_and_the_beta_it_uses(keep, epsilon):
    """ε 0.01 for the summed loss of 32: 0.01 / 32² for the mean; DQN Zoo's reading: / 4²."""
    overrides = ("experiment=budget_10m", "replay=proportional", f"agent.keep_maximum_step={keep}")
    assert train.derived_settings(validate_config(config(*overrides)))[1:] == [
        f"the optimizer's ε: {epsilon} (deepmind_rmsprop, inside the square root, for the "
        "batch's mean loss)",
        "β: 0.4 until step 50000, then linear to 1.0 at step 50000000",
    ]
    uniform = validate_config(config("experiment=budget_10m", "replay=uniform"))
    assert train.derived_settings(uniform)[-1] == "β: 0.0 throughout"


def test_beta_reaches_its_final_value_at_its_own_step_not_the_runs_last():
    cfg = config(
        *SMOKE,
        "replay=proportional",
        "train.total_steps=400",
        "replay.importance_exponent_final_step=1100",
    )
    run = validate_config(cfg)
    # Linear from learning start (step 100, β 0.4) to step 1100 (β 1): 0.52 at step 300.
    assert importance_exponent(run, 300) == pytest.approx(0.52)
    assert importance_exponent(run, 400) == pytest.approx(0.58)
    # the paper's: the last step
    replay = dataclasses.replace(run.replay, importance_exponent_final_step=None)
    assert importance_exponent(dataclasses.replace(run, replay=replay), 400) == 1.0


# Directory names a printed command must carry through a shell and Hydra's override grammar
# unchanged: a space, a comma (a sweep to Hydra), `=` (a sweep's job directory), quotes,
# brackets, a number, a boolean, characters a shell expands or splits on, non-ASCII.
AWKWARD_NAMES = [
    "runs/run b",
    "multirun/pong/seed=1",
    "runs/a,b",
    "it's",
    'say "hi"',
    "back\\slash",
    "x[1]",
    "{x}",
    "123",
    "true",
    " leading space",
    "#x",
    "a;b|c&d",
    "$HOME/*",
    "épreuve",
]


def shell_words(text: str) -> list[str]:
    """The arguments a POSIX shell makes of `text`."""
    printed = subprocess.run(
        ["sh", "-c", f"printf '%s\\0' {text}"], capture_output=True, check=True
    )
    return [word.decode() for word in printed.stdout.split(b"\0")[:-1]]


@pytest.mark.parametrize("name", AWKWARD_NAMES)
def test_a_printed_resume_command_pasted_into_a_shell_names_its_directory(name):
    """A run's `python train.py resume=...`, and a sweep's job's `hydra.sweep.dir=...`: each
    one shell word that Hydra reads back as the directory."""
    commands = {
        RunMode.RUN: ("python train.py ", "resume"),
        RunMode.MULTIRUN: ("the sweep's command with ", "hydra.sweep.dir"),
    }
    for mode, (prefix, key) in commands.items():
        hydra = OmegaConf.create({"mode": mode, "sweep": {"dir": name}})
        command = train.resume_command(Path(name), hydra)
        assert command.startswith(prefix)
        (word,) = shell_words(command.removeprefix(prefix))
        override = OverridesParser.create().parse_override(word)
        assert (override.key_or_group, override.value()) == (key, name)
