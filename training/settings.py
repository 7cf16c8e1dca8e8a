"""The run's own settings: the config's top level and its `train`, `evaluation` and
`checkpoint` sections. Agent steps (`*_steps`) are `env.frame_skip` emulator frames each
(`*_frames`); every default is the paper's."""

from dataclasses import dataclass
from typing import Any, ClassVar

from agents.settings import AgentSettings
from replay.settings import ReplaySettings
from schema import (
    BOOLEAN,
    FRACTION,
    INTEGER_LIMIT,
    NON_NEGATIVE_INTEGER,
    PATH,
    POSITIVE_INTEGER,
    POSITIVE_NUMBER,
    Rule,
    Settings,
    one_of,
    refusal,
    setting,
)

LARGEST = INTEGER_LIMIT - 1
SEED = Rule(f"an integer from 0 to {LARGEST}", lambda v: 0 <= v <= LARGEST)
LEARNING_START = Rule(
    "an integer from train.batch_size to train.total_steps (a run with no update)",
    POSITIVE_INTEGER.test,
)
# A whole number of agent steps; env.frame_skip is checked with the env (`launch.validation`).
EVERY_FRAMES = Rule("a positive multiple of env.frame_skip", POSITIVE_INTEGER.test)
FINAL_EPSILON = Rule("in [0, train.epsilon_start] (ε falls to it)", FRACTION.test)


@dataclass(frozen=True, kw_only=True)
class RunSettings(Settings):
    """The top level's settings beside the sections."""

    seed: int = setting(0, SEED, "hyperparameter")
    # a run directory to continue from (one without a config.yaml: `launch.run_config`)
    resume: str | None = setting(None, Rule("null or a run directory", PATH.test))
    # torch CPU threads: auto (OMP_NUM_THREADS, else the cores, <= 8) or N, at most the cores
    # this process may use (`launch.run_guard`: the machine's)
    threads: Any = setting(
        "auto",
        Rule("auto or a positive integer", lambda v: v == "auto" or type(v) is int and v > 0),
    )


@dataclass(frozen=True, kw_only=True)
class TrainSettings(Settings):
    section: ClassVar[str] = "train"

    total_steps: int = setting(50_000_000, POSITIVE_INTEGER)  # 200M frames
    learning_start_steps: int = setting(50_000, LEARNING_START)
    update_period_steps: int = setting(4, POSITIVE_INTEGER)
    target_update_period_steps: int = setting(30_000, POSITIVE_INTEGER)
    batch_size: int = setting(32, POSITIVE_INTEGER)
    epsilon_start: float = setting(1.0, FRACTION)
    epsilon_final: float = setting(0.01, FINAL_EPSILON)
    epsilon_decay_steps: int = setting(1_000_000, NON_NEGATIVE_INTEGER)
    reward_clip: float | None = setting(
        1.0, Rule("null (no clipping) or a number > 0", POSITIVE_NUMBER.test)
    )
    # a lost life: new_episode ends the stored episode, 2-31 no-op frames follow (DeepMind's Lua
    # code, the paper's); stop_bootstrap only stops bootstrapping (DQN Zoo); ignore (Dopamine)
    life_loss: str = setting("new_episode", one_of(("new_episode", "stop_bootstrap", "ignore")))
    log_period_steps: int = setting(10_000, POSITIVE_INTEGER)
    priority_histogram_period_steps: int = setting(250_000, POSITIVE_INTEGER)

    def check_together(self) -> None:
        if not self.batch_size <= self.learning_start_steps <= self.total_steps:
            key = self.key("learning_start_steps")
            raise refusal(key, self.learning_start_steps, LEARNING_START.allowed)
        if self.epsilon_final > self.epsilon_start:
            raise refusal(self.key("epsilon_final"), self.epsilon_final, FINAL_EPSILON.allowed)


@dataclass(frozen=True, kw_only=True)
class EvaluationSettings(Settings):
    """The paper's periodic test (Appendix B.2.3)."""

    section: ClassVar[str] = "evaluation"

    every_frames: int = setting(1_000_000, EVERY_FRAMES)
    frames: int = setting(500_000, POSITIVE_INTEGER)  # per test: no-op starts, capped as in env
    epsilon: float = setting(0.01, FRACTION)
    worker: bool = setting(True, BOOLEAN)  # test in another process (same scores); false: inline


@dataclass(frozen=True, kw_only=True)
class CheckpointSettings(Settings):
    section: ClassVar[str] = "checkpoint"

    every_steps: int = setting(250_000, POSITIVE_INTEGER)  # and at the end, on SIGTERM/SIGINT
    # each kept checkpoint has its own on-disk copy of the replay
    keep: int = setting(
        2,
        Rule("an integer >= 2 (a complete checkpoint must survive a failed save)", (2).__le__),
    )


@dataclass(frozen=True)
class Run:
    """A run's whole config, each section read by its schema (`launch.validation.run_settings`)."""

    seed: int
    resume: str | None
    threads: Any
    env: Settings  # envs.settings, by env.kind
    replay: ReplaySettings  # replay.settings, by replay.kind
    agent: AgentSettings
    train: TrainSettings
    evaluation: EvaluationSettings
    checkpoint: CheckpointSettings
