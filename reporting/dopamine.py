"""Dopamine's published DQN and Rainbow curves, and the bands that put ours beside them.

Dopamine's points are average training returns per iteration of 1M frames, median and min–max
over 5 runs (reporting/data/README.md); ours are bands of the same shape over our runs.
"""

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from envs.games import resolve_game
from reporting.report import format_interval
from reporting.results import packaged_rows

DOPAMINE_CSV = "dopamine_baselines_training_returns.csv"
DOPAMINE_AGENTS = ("DQN", "Rainbow")
ITERATION_FRAMES = 1_000_000  # Dopamine's iteration: its curves' points are 1M frames apart


@dataclass(frozen=True)
class Band:
    """A curve against frames: the median and the min–max range over runs."""

    frames: np.ndarray
    median: np.ndarray
    low: np.ndarray
    high: np.ndarray

    def until(self, frames: int) -> "Band":
        keep = self.frames <= frames
        return Band(self.frames[keep], self.median[keep], self.low[keep], self.high[keep])

    def cell(self, index: int) -> str:
        return format_interval(self.median[index], self.low[index], self.high[index])


@functools.cache
def dopamine_curves() -> dict[tuple[str, str], Band]:
    """(ROM id, agent) -> Dopamine's curve; its game names (`mspacman`) resolve like ours."""
    rows: dict[tuple[str, str], list[tuple[float, ...]]] = {}
    for row in packaged_rows(DOPAMINE_CSV):
        key = (resolve_game(row["game"]).rom_id, row["agent"])
        rows.setdefault(key, []).append(
            tuple(
                float(row[column])
                for column in ("frames", "median_return", "min_return", "max_return")
            )
        )
    return {key: Band(*np.array(sorted(points)).T) for key, points in rows.items()}


def band_over(curves: Sequence[tuple[np.ndarray, np.ndarray]]) -> Band:
    """(frames, values) curves -> their band over the union of their frame counts, each point
    over the curves that have it."""
    frames = np.unique(np.concatenate([f for f, _ in curves]))
    points = [[v[f == at][0] for f, v in curves if at in f] for at in frames]
    return Band(frames, *(np.array([op(p) for p in points]) for op in (np.median, np.min, np.max)))


def iteration_means(
    frames: np.ndarray, returns: np.ndarray, trained_frames: int
) -> tuple[np.ndarray, np.ndarray]:
    """(k·I, mean return of the training episodes that ended in ((k − 1)·I, k·I]) for each
    iteration k of I = 1M frames that the run completed (k·I ≤ `trained_frames`) and in which
    an episode ended: Dopamine's measure, an episode counted in the iteration it ends in."""
    iteration = -(-np.asarray(frames) // ITERATION_FRAMES)  # ceil: an end at k·I is in k
    complete = np.arange(1, trained_frames // ITERATION_FRAMES + 1)
    present = complete[np.isin(complete, iteration)]
    means = np.array([np.mean(returns[iteration == k]) for k in present])
    return present * ITERATION_FRAMES, means


def dopamine_at(game: str, frames: int) -> tuple[int | None, dict[str, Band]]:
    """(Dopamine's last frame count ≤ `frames`, each agent's curve up to it); (None, {}) for a
    game Dopamine did not publish or a run shorter than its first point."""
    curves = {
        agent: dopamine_curves()[game, agent].until(frames)
        for agent in DOPAMINE_AGENTS
        if (game, agent) in dopamine_curves()
    }
    curves = {agent: band for agent, band in curves.items() if band.frames.size}
    if not curves:
        return None, {}
    return int(max(band.frames[-1] for band in curves.values())), curves
