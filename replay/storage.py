"""Replay memory that stores every Atari frame once and rebuilds stacked states on demand."""

from dataclasses import dataclass, field

import numpy as np


@dataclass
class SlotChanges:
    """Slots that a write made sampleable (`entered`) or unsampleable (`left`)."""

    entered: list[int] = field(default_factory=list)
    left: list[int] = field(default_factory=list)


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
    """

    def __init__(self, capacity: int, history_length: int = 4, frame_shape=(84, 84)):
        if capacity < history_length + 2:
            raise ValueError(
                f"replay.capacity={capacity} must be at least history_length + 2 = "
                f"{history_length + 2}"
            )
        self.capacity = capacity
        self.history_length = history_length
        self.frame_shape = tuple(frame_shape)
        self.frames = np.zeros((capacity, *self.frame_shape), dtype=np.uint8)
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

    def gather_states(self, newest_slots: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Fill `out` (len(newest_slots), h, *frame_shape) with the states ending at the slots.

        Writes into the caller's preallocated array: fresh megabyte-sized arrays on every
        batch cost several times the gather itself in page faults.
        """
        slots = (newest_slots[:, None] + self._history_offsets) % self.capacity
        np.take(self.frames, slots, axis=0, out=out)
        starts = self.episode_starts[slots]
        # A frame is zero when an episode starts at any later position of the same stack.
        start_at_or_after = np.logical_or.accumulate(starts[:, ::-1], axis=1)[:, ::-1]
        out[:, :-1][start_at_or_after[:, 1:]] = 0
        return out
