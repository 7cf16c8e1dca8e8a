"""Replay memory that stores every transition whole, so that any one of them can be forgotten:
when it is full, the transition with the lowest priority goes (the patent's deletion by
expected learning progress)."""

import numpy as np

from replay.min_tree import MinPriorityTree
from replay.storage import SlotChanges


class TransitionStorage:
    """`capacity` slots, each holding one transition with all of its frames.

    Layout: `frames[i]` holds h + 1 frames (h = `history_length`, oldest first): the state's
    h frames, then the next frame, so the state is `frames[i, :h]` and the next state
    `frames[i, 1:]`. `actions[i]`, `rewards[i]` and `terminals[i]` describe the step, as in
    `FrameStorage` (reward clipped by the caller, terminal meaning "do not bootstrap"). States
    follow `FrameStorage`'s rules, which are the acting side's (`envs.frame_stack`): a state
    stacks the last h frames of its episode, every frame before the episode's first is zero;
    a terminal step (a lost life included) without `start_episode` lets the stack run on; a
    time-limit truncation stores the true last frame as the next frame. Each frame is thus
    stored up to h + 1 times (about 5x `FrameStorage`'s memory), the price of forgetting any
    single transition.

    Forgetting: slots fill in order; once all are taken, a new transition replaces the one
    with the lowest raw priority, ties going to the one stored first (`MinPriorityTree`). A
    new transition enters at the largest priority written so far (1 at first), and
    `prioritize` sets the priorities of replayed ones: the buffer passes the priority signal's
    values whatever the sampler, so under uniform sampling priorities still decide what is
    forgotten. Until anything is replayed all priorities tie and the oldest goes first.

    Invariants: every slot holding a transition is sampleable (a slot's frames are its own,
    nothing else overwrites them); the tree's live slots are exactly the sampleable ones.
    `frames_written` is the checkpoints' ring cursor: each write of slot v advances it to the
    next count that is v + 1 modulo capacity, so every slot written since it was s lies in
    ring positions s … frames_written − 1. While the memory fills that is one per write, as a
    ring; once it forgets by priority, writes scatter and a checkpoint copies in effect every
    slot.
    """

    def __init__(self, capacity: int, history_length: int, frame_shape: tuple[int, ...]):
        self.capacity = capacity
        self.history_length = history_length
        self.frame_shape = tuple(frame_shape)
        self.frames = np.zeros((capacity, history_length + 1, *self.frame_shape), dtype=np.uint8)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminals = np.zeros(capacity, dtype=np.float32)
        self.sampleable = np.zeros(capacity, dtype=bool)
        self.num_sampleable = 0
        self.frames_written = 0
        self.eviction = MinPriorityTree(capacity)
        # The state the next step is taken from (the acting side's stack).
        self._stack = np.zeros((history_length, *self.frame_shape), dtype=np.uint8)
        self._awaiting_action = False

    @staticmethod
    def frames_per_slot(history_length: int) -> int:
        return history_length + 1

    def start_episode(self, frame: np.ndarray) -> SlotChanges:
        """Begin a state of zeros and `frame`; nothing is stored until its step is added."""
        self._stack[:-1] = 0
        self._stack[-1] = frame
        self._awaiting_action = True
        return SlotChanges()

    def add(
        self, action: int, reward: float, terminal: bool, next_frame: np.ndarray
    ) -> SlotChanges:
        """Store the step taken from the current state, forgetting the lowest-priority
        transition if the memory is full."""
        if not self._awaiting_action:
            raise RuntimeError("TransitionStorage.add before start_episode")
        changes = SlotChanges()
        if self.num_sampleable < self.capacity:
            slot = self.num_sampleable  # nothing is forgotten before the memory is full
        else:
            slot = self.eviction.lowest()
            self.eviction.leave(slot)
            self.sampleable[slot] = False
            self.num_sampleable -= 1
            changes.left.append(slot)
        self.frames[slot, :-1] = self._stack
        self.frames[slot, -1] = next_frame
        self.actions[slot] = action
        self.rewards[slot] = reward
        self.terminals[slot] = float(terminal)
        self.frames_written += (slot - self.frames_written) % self.capacity + 1
        self.eviction.enter(slot)
        self.sampleable[slot] = True
        self.num_sampleable += 1
        changes.entered.append(slot)
        self._stack[:-1] = self._stack[1:]
        self._stack[-1] = next_frame
        return changes

    def prioritize(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Raw priorities of replayed transitions: the lowest is forgotten first."""
        self.eviction.update(indices, priorities)

    def gather_transitions(self, indices: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Fill `out` (2B, h, *frame_shape) with the states of the B transitions at `indices`
        and then their next states."""
        # Fancy indexing, not np.take: take over the strided view of the first h frames
        # copies the whole memory first.
        batch_size = len(indices)
        out[:batch_size] = self.frames[indices, :-1]
        out[batch_size:] = self.frames[indices, 1:]
        return out

    # Everything but the frames, which checkpoints persist separately.
    _STATE_ARRAYS = ("actions", "rewards", "terminals", "sampleable")

    def state_dict(self) -> dict:
        state = {name: getattr(self, name).copy() for name in self._STATE_ARRAYS}
        state.update(
            stack=self._stack.copy(),
            frames_written=self.frames_written,
            num_sampleable=self.num_sampleable,
            awaiting_action=self._awaiting_action,
            eviction=self.eviction.state_dict(),
        )
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore everything but `frames`, which the caller fills in place."""
        for name in self._STATE_ARRAYS:
            getattr(self, name)[:] = state[name]
        self._stack[:] = state["stack"]
        self.frames_written = int(state["frames_written"])
        self.num_sampleable = int(state["num_sampleable"])
        self._awaiting_action = bool(state["awaiting_action"])
        self.eviction.load_state_dict(state["eviction"])
