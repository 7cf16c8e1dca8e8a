"""The samplers by name: `replay.kind` in the config. A new sampler is one module (naming its
settings' schema, like `replay.settings`', and building itself from them: `from_settings`),
one line here and one `configs/replay/<kind>.yaml` on that schema's defaults
(`- /<kind>_replay_settings@replay`: `launch.config_defaults`). The storages by what they
forget when full: `replay.eviction`."""

import numpy as np

from replay.proportional import ProportionalSampler
from replay.rank_based import RankBasedSampler
from replay.sampler import Sampler, UniformSampler
from replay.settings import ReplaySettings
from replay.storage import FrameStorage, Storage
from replay.transition_storage import TransitionStorage
from schema import one_of, refusal

SAMPLERS: dict[str, type] = {
    "uniform": UniformSampler,
    "proportional": ProportionalSampler,
    "rank_based": RankBasedSampler,
}
STORAGES: dict[str, type] = {
    "fifo": FrameStorage,
    "lowest_priority": TransitionStorage,
}


def sampler_class(kind: str) -> type:
    one_of(SAMPLERS).check("replay.kind", kind)
    return SAMPLERS[kind]


def build_sampler(settings: ReplaySettings, rng: np.random.Generator) -> Sampler:
    """The sampler `settings.kind`, built from the replay section its schema read."""
    return SAMPLERS[settings.kind].from_settings(settings, rng)


def storage_class(eviction: str) -> type:
    """The storage that forgets by `eviction`: `fifo` (the frame ring, the paper's) or
    `lowest_priority` (whole transitions, the lowest raw priority forgotten first)."""
    one_of(STORAGES).check("replay.eviction", eviction)
    return STORAGES[eviction]


# `replay.device`: the learner's device (the frames are gathered there), and only the frame
# ring keeps a copy of its frames on a device.
REPLAY_DEVICES = "cpu, or agent.device's CUDA device with replay.eviction=fifo"


def check_device_copy(eviction: str, device) -> None:
    """A storage that forgets by `eviction` may keep a copy of its frames on `device` (not
    the host), or a one-line ValueError naming `replay.device`."""
    if storage_class(eviction) is not FrameStorage:
        raise refusal("replay.device", device, REPLAY_DEVICES)


def build_storage(
    eviction: str, capacity: int, history_length: int, frame_shape: tuple[int, int], device=None
) -> Storage:
    """`device`: where a copy of the frames lives for gathering (None: the host only)."""
    if device is None:
        return storage_class(eviction)(capacity, history_length, frame_shape)
    check_device_copy(eviction, device)
    return FrameStorage(capacity, history_length, frame_shape, device=device)
