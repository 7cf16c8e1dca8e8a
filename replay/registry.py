"""The samplers by name: `replay.kind` in the config. A new sampler is one module, one line
here and one `configs/replay/<kind>.yaml` whose keys are its constructor's arguments. The
storages by what they forget when full: `replay.eviction`."""

import inspect
from collections.abc import Mapping

import numpy as np

from replay.proportional import ProportionalSampler
from replay.rank_based import RankBasedSampler
from replay.sampler import Sampler, UniformSampler
from replay.storage import FrameStorage, Storage
from replay.transition_storage import TransitionStorage

SAMPLERS: dict[str, type] = {
    "uniform": UniformSampler,
    "proportional": ProportionalSampler,
    "rank_based": RankBasedSampler,
}
STORAGES: dict[str, type] = {
    "fifo": FrameStorage,
    "lowest_priority": TransitionStorage,
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


def storage_class(eviction: str) -> type:
    """The storage that forgets by `eviction`: `fifo` (the frame ring, the paper's) or
    `lowest_priority` (whole transitions, the lowest raw priority forgotten first)."""
    if eviction not in STORAGES:
        raise ValueError(
            f"replay.eviction={eviction} is not allowed: must be one of {', '.join(STORAGES)}"
        )
    return STORAGES[eviction]


def build_storage(
    eviction: str, capacity: int, history_length: int, frame_shape: tuple[int, int], device=None
) -> Storage:
    """`device`: where a copy of the frames lives for gathering (None: the host only); only
    the frame ring keeps one."""
    if device is None:
        return storage_class(eviction)(capacity, history_length, frame_shape)
    if storage_class(eviction) is not FrameStorage:
        raise ValueError(f"replay.device={device} needs replay.eviction=fifo, not {eviction}")
    return FrameStorage(capacity, history_length, frame_shape, device=device)
