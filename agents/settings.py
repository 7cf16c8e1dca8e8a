"""The learner's settings (the config's `agent` section): Tuned Double DQN (van Hasselt et al.
2016) as Schaul et al. (2016) used it."""

from dataclasses import dataclass
from typing import ClassVar

from agents.networks import NETWORKS
from agents.optimizer import OPTIMIZERS
from agents.targets import TARGET_RULES
from schema import (
    BOOLEAN,
    DEVICE,
    FRACTION,
    POSITIVE_INTEGER,
    POSITIVE_NUMBER,
    Rule,
    Settings,
    one_of,
    refusal,
    setting,
)


@dataclass(frozen=True, kw_only=True)
class AgentSettings(Settings):
    section: ClassVar[str] = "agent"

    device: str = setting("auto", DEVICE)
    history_length: int = setting(4, POSITIVE_INTEGER, "identity")  # frames per state
    # nature (Atari frames, a shared head bias) | nature_dqn (a bias per action) | dopamine
    # (nature_dqn with TensorFlow's padding and initialisation) | minatar
    network: str = setting("nature", one_of(NETWORKS))
    # double_dqn (the paper's) | dqn: max_a Q_target(s', a)
    target_rule: str = setting("double_dqn", one_of(TARGET_RULES))
    discount: float = setting(0.99, FRACTION)
    # η for uniform replay; the prioritized presets divide it by 4
    learning_rate: float = setting(0.00025, POSITIVE_NUMBER, "hyperparameter")
    rmsprop_decay: float = setting(0.95, Rule("in [0, 1)", lambda v: 0 <= v < 1))
    rmsprop_epsilon: float = setting(0.01, POSITIVE_NUMBER)  # DeepMind's, for the summed loss
    # deepmind_rmsprop: ε inside the square root | torch_rmsprop: outside (torch.optim.RMSprop)
    optimizer: str = setting("deepmind_rmsprop", one_of(OPTIMIZERS))
    # false (the paper's reading): ε as it is at any η | true (DQN Zoo's prioritized agent): ε
    # scaled with η so that the ε-dominated step stays uniform η's (`optimizer_epsilon`)
    keep_maximum_step: bool = setting(False, BOOLEAN)
    td_error_clip: float = setting(1.0, POSITIVE_NUMBER)  # for the Huber loss and the priorities
    # true (CUDA only): act during each update with the parameters before it (docs/deviations.md)
    pipelined: bool = setting(False, BOOLEAN)
    # true: on CUDA, the update and acting replay captured graphs, each checked against the
    # eager call (docs/gpu.md); off until a GPU has passed pytest -k cuda
    cuda_graphs: bool = setting(False, BOOLEAN, "changeable")
    # true: the update compiled whole by torch.compile (agents/compilation.py): rounded
    # differently, and on CPU a small network's update much faster
    torch_compile: bool = setting(False, BOOLEAN, "fallback")

    def check_together(self) -> None:
        if self.torch_compile and self.cuda_graphs:
            raise refusal(
                "agent.torch_compile", "true", "false with agent.cuda_graphs=true (choose one)"
            )
