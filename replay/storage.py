"""The storage protocol (what the replay buffer and the checkpoints need from a memory of
transitions), and the frame ring: every Atari frame stored once, stacked states rebuilt on
demand, the oldest transition forgotten first."""

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch


@dataclass
class SlotChanges:
    """Slots that a write made sampleable (`entered`) or unsampleable (`left`)."""

    entered: list[int] = field(default_factory=list)
    left: list[int] = field(default_factory=list)


class Storage(Protocol):
    """Stores transitions in `capacity` slots and decides which slots are sampleable and which
    transition is forgotten when the memory is full.

    The loop writes episodes as `start_episode(first frame)` followed by one
    `add(action, reward, terminal, next frame)` per step; `terminal` means "do not
    bootstrap" (a life loss included), and a state stacks the last `history_length` frames of
    its episode, zeros before the episode's first frame. Every write reports the slots that
    became or stopped being sampleable (`SlotChanges`); `actions`, `rewards`, `terminals` and
    `sampleable` are per-slot arrays. `prioritize` gives sampled transitions the raw priorities
    the buffer computed, for a storage that forgets by priority.

    Checkpoints: `frames` (a slot per row of its first axis) is copied to disk apart from
    `state_dict`, and only the rows that may have changed: every slot written since
    `frames_written` was s lies in ring positions s, s + 1, …, frames_written − 1 (mod
    capacity).
    """

    capacity: int
    history_length: int
    frame_shape: tuple[int, ...]
    frames: np.ndarray
    frames_written: int
    actions: np.ndarray
    rewards: np.ndarray
    terminals: np.ndarray
    sampleable: np.ndarray
    num_sampleable: int

    @staticmethod
    def frames_per_slot(history_length: int) -> int: ...

    def start_episode(self, frame: np.ndarray) -> SlotChanges: ...

    def add(
        self, action: int, reward: float, terminal: bool, next_frame: np.ndarray
    ) -> SlotChanges: ...

    def gather_transitions(self, indices: np.ndarray, out: np.ndarray) -> np.ndarray: ...

    def prioritize(self, indices: np.ndarray, priorities: np.ndarray) -> None: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


class FrameStorage:
    """A ring of `capacity` slots, each holding one frame and the step taken from it.

    Layout: `frames[i]` is one observation; `actions[i]`, `rewards[i]` and `terminals[i]`
    describe the step taken from it (reward already clipped by the caller; terminal means
    "do not bootstrap", which includes a life loss); `episode_starts[i]` marks the first frame
    of an episode. An episode of T steps fills T + 1 consecutive slots: its last frame — the
    true last frame, also after a time-limit truncation — has no action.

    The transition of slot i is (state i, action i, reward i, terminal i, state i + 1), where
    state j stacks frames j − h + 1 … j (h = `history_length`, oldest first) and every frame
    before the first frame of j's episode is zero. The acting side builds its state with the
    same rule (`envs.frame_stack.FrameStack`).

    Sampleable slots (the only ones a sampler may return): slot i has its action recorded and
    its next frame written, and no frame of its stack has been overwritten since. Writing slot
    c replaces c's frame and a frame that slots c + 1 … c + h − 1 stack, so those h slots leave
    the set; hence the h − 1 oldest slots (from the cursor on) are never sampleable, even when
    the frames they would lose are zero padding anyway. The storage alone maintains this set
    and reports each change as a `SlotChanges`, so samplers never draw an invalid slot and
    never resample.

    Forgetting is first in, first out, whatever the priorities; `frames_written` counts the
    frames written, in ring order.

    `device` (a torch device, or None): keep a copy of the ring there too (`replay.device`), so
    that batches are gathered where the learner runs, with no per-update copy of the states
    (`gather_transitions` then fills a tensor on it). `frames` on the host stays the record
    that checkpoints copy; every write goes to both, and `load_state_dict` refreshes the copy.
    Neither a write nor a gather makes the host wait for the device: a frame goes through a
    page-locked buffer and is copied asynchronously, and a gather sends its slot indices and
    zero mask in one asynchronous transfer (`_Staging`).
    """

    def __init__(
        self, capacity: int, history_length: int, frame_shape: tuple[int, ...], device=None
    ):
        if capacity < self.smallest_capacity(history_length):
            raise ValueError(
                f"replay.capacity={capacity} must be at least history_length + 2 = "
                f"{self.smallest_capacity(history_length)}"
            )
        self.capacity = capacity
        self.history_length = history_length
        self.frame_shape = tuple(frame_shape)
        self.frames = np.zeros((capacity, *self.frame_shape), dtype=np.uint8)
        self.device = None if device is None else torch.device(device)
        self.device_frames = None
        if self.device is not None:
            self.device_frames = torch.zeros(self.frames.shape, dtype=torch.uint8, device=device)
            self._frame_staging = _Staging(self.frame_shape, self.device)
            self._request_staging = _Staging((0,), self.device)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminals = np.zeros(capacity, dtype=np.float32)
        self.episode_starts = np.zeros(capacity, dtype=bool)
        self.sampleable = np.zeros(capacity, dtype=bool)
        self.num_sampleable = 0
        self.cursor = 0
        self.frames_written = 0
        self._awaiting_action = False
        # Offsets from a state's newest slot to each of its frames, oldest first.
        self._history_offsets = np.arange(-(history_length - 1), 1)

    @staticmethod
    def smallest_capacity(history_length: int) -> int:
        """The fewest slots the ring takes (`replay.capacity`, checked up front against it)."""
        return history_length + 2

    @staticmethod
    def frames_per_slot(history_length: int) -> int:
        return 1

    def start_episode(self, frame: np.ndarray) -> SlotChanges:
        """Write the first frame of a new episode; the previous episode's last frame keeps no
        action."""
        changes = SlotChanges()
        self._write_frame(frame, episode_start=True, changes=changes)
        return changes

    def add(
        self, action: int, reward: float, terminal: bool, next_frame: np.ndarray
    ) -> SlotChanges:
        """Record the step taken from the newest frame and write the frame it led to."""
        if not self._awaiting_action:
            raise RuntimeError("FrameStorage.add before start_episode")
        previous = (self.cursor - 1) % self.capacity
        self.actions[previous] = action
        self.rewards[previous] = reward
        self.terminals[previous] = float(terminal)
        changes = SlotChanges()
        self._write_frame(next_frame, episode_start=False, changes=changes)
        self.sampleable[previous] = True
        self.num_sampleable += 1
        changes.entered.append(previous)
        return changes

    def _write_frame(self, frame: np.ndarray, episode_start: bool, changes: SlotChanges):
        for offset in range(self.history_length):
            slot = (self.cursor + offset) % self.capacity
            if self.sampleable[slot]:
                self.sampleable[slot] = False
                self.num_sampleable -= 1
                changes.left.append(slot)
        self.frames[self.cursor] = frame
        if self.device_frames is not None:
            self._frame_staging.fill()[...] = frame
            self._frame_staging.send_to(self.device_frames[self.cursor])
        self.episode_starts[self.cursor] = episode_start
        self.cursor = (self.cursor + 1) % self.capacity
        self.frames_written += 1
        self._awaiting_action = True

    # Everything but the frames, which checkpoints persist separately (they are 99.8 % of it).
    _STATE_ARRAYS = ("actions", "rewards", "terminals", "episode_starts", "sampleable")

    def state_dict(self) -> dict:
        state = {name: getattr(self, name).copy() for name in self._STATE_ARRAYS}
        state.update(
            cursor=self.cursor,
            frames_written=self.frames_written,
            num_sampleable=self.num_sampleable,
            awaiting_action=self._awaiting_action,
        )
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore everything but `frames`, which the caller fills in place."""
        for name in self._STATE_ARRAYS:
            getattr(self, name)[:] = state[name]
        self.cursor = int(state["cursor"])
        self.frames_written = int(state["frames_written"])
        self.num_sampleable = int(state["num_sampleable"])
        self._awaiting_action = bool(state["awaiting_action"])
        if self.device_frames is not None:  # the caller has filled `frames` by now
            self.device_frames.copy_(torch.from_numpy(self.frames))

    def prioritize(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """The ring forgets its oldest transition: priorities do not matter here."""

    def gather_transitions(self, indices: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Fill `out` (2B, h, *frame_shape) with the states of the B transitions at `indices`
        and then their next states, which end one slot later."""
        return self.gather_states(np.concatenate((indices, (indices + 1) % self.capacity)), out)

    def gather_states(self, newest_slots: np.ndarray, out):
        """Fill `out` (len(newest_slots), h, *frame_shape) with the states ending at the slots:
        a numpy array, or with `device` a uint8 tensor there (the same index arithmetic, on the
        host; only the frames are read on the device).

        Writes into the caller's preallocated array: fresh megabyte-sized arrays on every
        batch cost several times the gather itself in page faults.
        """
        slots = (newest_slots[:, None] + self._history_offsets) % self.capacity
        starts = self.episode_starts[slots]
        # A frame is zero when an episode starts at any later position of the same stack.
        start_at_or_after = np.logical_or.accumulate(starts[:, ::-1], axis=1)[:, ::-1]
        zeroed = start_at_or_after[:, 1:]
        if isinstance(out, np.ndarray):
            # mode="clip": the slots are in range already, and numpy's default mode ("raise")
            # gathers into a temporary and copies it to `out`, which took as long again.
            np.take(self.frames, slots, axis=0, out=out, mode="clip")
            out[:, :-1][zeroed] = 0
            return out
        index, mask = self._send_request(slots, zeroed)
        torch.index_select(self.device_frames, 0, index, out=out.view(-1, *self.frame_shape))
        # masked_fill_, not boolean indexing: no device-to-host synchronization.
        out[:, :-1].masked_fill_(mask, 0)
        return out

    def _send_request(self, slots: np.ndarray, zeroed: np.ndarray):
        """The slot indices (int64) and the zero mask (one bool per frame but the newest of
        each state) on the device, from one transfer of one byte buffer: the indices' bytes,
        then the mask's. Returns them as device tensors, the mask shaped to broadcast over
        `out[:, :-1]`."""
        index_bytes = 8 * slots.size
        if self._request_staging.host.numel() != index_bytes + zeroed.size:
            self._request_staging = _Staging((index_bytes + zeroed.size,), self.device)
        host = self._request_staging.fill()
        host[:index_bytes].view(np.int64)[:] = slots.reshape(-1)
        host[index_bytes:].view(np.bool_)[:] = zeroed.reshape(-1)
        request = self._request_staging.send()
        index = request[:index_bytes].view(torch.int64)
        mask = request[index_bytes:].view(torch.bool)
        return index, mask.view(*zeroed.shape, *(1,) * len(self.frame_shape))


class _Staging:
    """A host buffer of uint8 `shape`, page-locked for a CUDA device, from which copies to the
    device run asynchronously. Invariant: `fill` hands the buffer out only once the previous
    copy from it has finished (an event; it was issued a step or an update before, so the
    host hardly ever waits). For a CPU device the buffer is plain memory and copies are
    synchronous."""

    def __init__(self, shape: tuple[int, ...], device: torch.device) -> None:
        cuda = device.type == "cuda"
        self.device = device
        self.host = torch.empty(shape, dtype=torch.uint8, pin_memory=cuda)
        self.on_device: torch.Tensor | None = None  # `send`'s destination, made on first use
        self._copied = torch.cuda.Event() if cuda else None

    def fill(self) -> np.ndarray:
        """The host buffer to write the next values into."""
        if self._copied is not None:
            self._copied.synchronize()
        return self.host.numpy()

    def send(self) -> torch.Tensor:
        """Start the copy into this buffer's device tensor and return that tensor."""
        if self.on_device is None:
            self.on_device = torch.empty_like(self.host, device=self.device)
        return self.send_to(self.on_device)

    def send_to(self, destination: torch.Tensor) -> torch.Tensor:
        """Start the copy into `destination` (uint8, of the buffer's shape) on the current
        stream, which orders it before everything issued there later."""
        destination.copy_(self.host, non_blocking=True)
        if self._copied is not None:
            self._copied.record()
        return destination
