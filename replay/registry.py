"""The samplers by name: `replay.kind` in the config. A new sampler is one module (naming its
settings' schema, like `replay.settings`', and building itself from them: `from_settings`),
one line here and one `configs/replay/<kind>.yaml` on that schema's defaults
(`- /<kind>_replay_settings@replay`: `launch.config_defaults`). The storages by what they
forget when full: `replay.eviction`. Both are checked by the settings' rules, which look
them up here; what is built from settings a schema has read is built as they say."""

from replay.proportional import ProportionalSampler
from replay.rank_based import RankBasedSampler
from replay.sampler import UniformSampler
from replay.settings import KIND, SAMPLERS, STORAGES
from replay.storage import FrameStorage, Storage
from replay.transition_storage import TransitionStorage

SAMPLERS.update(
    uniform=UniformSampler, proportional=ProportionalSampler, rank_based=RankBasedSampler
)
# fifo: the frame ring, the paper's; lowest_priority: whole transitions, the lowest raw
# priority forgotten first.
STORAGES.update(fifo=FrameStorage, lowest_priority=TransitionStorage)


def sampler_class(kind: str) -> type:
    """The sampler named `kind`, or a one-line ValueError naming `replay.kind` (its rule's)."""
    KIND.check("replay.kind", kind)
    return SAMPLERS[kind]


def build_storage(
    eviction: str, capacity: int, history_length: int, frame_shape: tuple[int, int], device=None
) -> Storage:
    """`device`: where a copy of the frames lives for gathering (None: the host only; only the
    frame ring, `fifo`, keeps one)."""
    if device is None:
        return STORAGES[eviction](capacity, history_length, frame_shape)
    return FrameStorage(capacity, history_length, frame_shape, device=device)
