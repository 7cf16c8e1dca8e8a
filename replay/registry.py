"""The samplers by name: `replay.kind` in the config. A new sampler is one module, one line
here and one `configs/replay/<kind>.yaml` whose keys are its constructor's arguments."""

import inspect
from collections.abc import Mapping

import numpy as np

from replay.proportional import ProportionalSampler
from replay.rank_based import RankBasedSampler
from replay.sampler import Sampler, UniformSampler

SAMPLERS: dict[str, type] = {
    "uniform": UniformSampler,
    "proportional": ProportionalSampler,
    "rank_based": RankBasedSampler,
}


def build_sampler(kind: str, settings: Mapping, rng: np.random.Generator) -> Sampler:
    """The sampler `kind`, given the entries of `settings` named like its constructor's
    arguments (the replay config holds the loop's replay keys too, e.g. β)."""
    if kind not in SAMPLERS:
        raise ValueError(f"replay.kind={kind} is not allowed: must be one of {', '.join(SAMPLERS)}")
    sampler_class = SAMPLERS[kind]
    names = inspect.signature(sampler_class).parameters
    arguments = {name: settings[name] for name in names if name in settings and name != "rng"}
    return sampler_class(rng=rng, **arguments)
