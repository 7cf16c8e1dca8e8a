"""What the replay did with its transitions (Schaul et al. 2016, Section 5 and Figures 10–11)."""

import numpy as np


class ReplayStatistics:
    """Per-slot replay counts and ages, and what left the ring without ever being replayed.

    Invariant: `replays[slot]` counts the minibatches that drew the transition now in `slot`
    (reset when the slot's transition is evicted); `added_at[slot]` is the number of
    transitions added before it, so the age of a sampled transition, in transitions, is
    `added - added_at[slot]`; `last_abs_td_error[slot]` is its last-seen |δ| (NaN until first
    replayed), whatever the sampler, which is also the previous |δ| of the `td_error_change`
    priority signal. O(batch) work per sample and O(1) per eviction.
    """

    def __init__(self, capacity: int):
        self.replays = np.zeros(capacity, dtype=np.int64)
        self.added_at = np.zeros(capacity, dtype=np.int64)
        self.last_abs_td_error = np.full(capacity, np.nan, dtype=np.float32)
        self.added = 0
        self.evicted = 0
        self.evicted_unreplayed = 0
        self._sampled_ages_sum = 0
        self._sampled = 0

    def entered(self, slot: int) -> None:
        self.replays[slot] = 0
        self.added_at[slot] = self.added
        self.last_abs_td_error[slot] = np.nan
        self.added += 1

    def left(self, slot: int) -> None:
        self.evicted += 1
        self.evicted_unreplayed += self.replays[slot] == 0

    def sampled(self, indices: np.ndarray) -> None:
        np.add.at(self.replays, indices, 1)
        self._sampled_ages_sum += int((self.added - self.added_at[indices]).sum())
        self._sampled += len(indices)

    def learned(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        self.last_abs_td_error[indices] = np.abs(td_errors)

    def summary(self, sampleable: np.ndarray) -> dict[str, float]:
        """Scalars since the last summary (mean sampled age) or over the run (the rest);
        `sampleable` is the storage's mask of live slots."""
        live_replays = self.replays[sampleable]
        scalars = {
            "replay_stats/mean_sampled_age": self._sampled_ages_sum / max(self._sampled, 1),
            "replay_stats/evicted_unreplayed_fraction": self.evicted_unreplayed
            / max(self.evicted, 1),
            "replay_stats/mean_replays_per_live_transition": float(live_replays.mean())
            if live_replays.size
            else 0.0,
            "replay_stats/never_replayed_live_fraction": float((live_replays == 0).mean())
            if live_replays.size
            else 0.0,
        }
        self._sampled_ages_sum = self._sampled = 0
        return scalars

    def profile(self, sampleable: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Last-seen |δ| and replays per added transition since insertion, of live slots."""
        age = np.maximum(self.added - self.added_at[sampleable], 1)
        return self.last_abs_td_error[sampleable], self.replays[sampleable] / age

    def state_dict(self) -> dict:
        return {
            "replays": self.replays.copy(),
            "added_at": self.added_at.copy(),
            "last_abs_td_error": self.last_abs_td_error.copy(),
            "counters": [
                self.added,
                self.evicted,
                self.evicted_unreplayed,
                self._sampled_ages_sum,
                self._sampled,
            ],
        }

    def load_state_dict(self, state: dict) -> None:
        self.replays[:] = state["replays"]
        self.added_at[:] = state["added_at"]
        self.last_abs_td_error[:] = state["last_abs_td_error"]
        (
            self.added,
            self.evicted,
            self.evicted_unreplayed,
            self._sampled_ages_sum,
            self._sampled,
        ) = (int(value) for value in state["counters"])
