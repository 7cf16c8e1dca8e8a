"""Learning curves on a common grid, their statistics over seeds, normalization, and the
learning-speed summary of the paper's Figure 4. Pure numpy: no files, no plotting.

The grid is `bins` equal fractions of each run's own training length: point j (1-based)
stands for the fraction j / bins and holds the mean of the run's values logged in
((j − 1) / bins, j / bins] of its total steps (values at step 0 go to the first point). A
point with no value repeats the previous one; points before the first value are NaN, and so are
the points beyond what the run trained (an unfinished run). Test evaluations logged every
total/bins steps therefore land one per point, unchanged.
"""

import warnings
from dataclasses import dataclass

import numpy as np

UNIFORM = "uniform"  # the variant name of uniform replay with the paper's settings


def fractions(bins: int) -> np.ndarray:
    return np.arange(1, bins + 1) / bins


def binned(
    steps: np.ndarray, values: np.ndarray, total_steps: int, bins: int, trained: int | None = None
) -> np.ndarray:
    """The run's curve on the grid (see the module docstring), of a run that trained `trained`
    of its `total_steps` (all of them by default)."""
    position = np.ceil(np.asarray(steps) / total_steps * bins).astype(np.int64) - 1
    position = np.clip(position, 0, bins - 1)
    counts = np.bincount(position, minlength=bins)
    sums = np.bincount(position, weights=values, minlength=bins)
    last = np.maximum.accumulate(np.where(counts > 0, np.arange(bins), -1))  # the last point set
    curve = np.where(last >= 0, sums[last] / np.maximum(counts[last], 1), np.nan)
    reached = total_steps if trained is None else trained
    curve[np.arange(1, bins + 1) * total_steps > reached * bins] = np.nan  # exact: no float
    return curve


def quartiles(curves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(25th percentile, median, 75th percentile) over rows (seeds), per grid point, or NaN."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns give NaN, as wanted
        low, median, high = np.nanpercentile(np.asarray(curves), [25, 50, 75], axis=0)
    return low, median, high


def median(curves) -> np.ndarray:
    return quartiles(curves)[1]


def normalized(score, random_score: float, reference: float):
    """The paper's Equation 4: (score − random) / |reference − random|, against human or uniform."""
    return (np.asarray(score, dtype=np.float64) - random_score) / abs(reference - random_score)


def running_max(curve: np.ndarray) -> np.ndarray:
    """Best value so far; NaN until the first value."""
    return np.fmax.accumulate(curve)


def running_mean(curve: np.ndarray) -> np.ndarray:
    """Mean of the values so far; NaN until the first value."""
    present = ~np.isnan(curve)
    counts = np.cumsum(present)
    with np.errstate(all="ignore"):
        return np.where(counts > 0, np.cumsum(np.where(present, curve, 0.0)) / counts, np.nan)


def equivalence_point(curve: np.ndarray, level: float = 1.0) -> float | None:
    """First grid fraction where `curve` reaches `level` (None if it never does)."""
    reached = np.flatnonzero(curve >= level - 1e-12)
    return None if reached.size == 0 else float(reached[0] + 1) / curve.size


@dataclass(frozen=True)
class LearningSpeed:
    """Figure 4 for one variant: per grid fraction, the median over games of the
    baseline-normalized best-so-far score (left panel) and mean-so-far score (right panel),
    and the fractions of training where each first reaches 100 % (None: never)."""

    variant: str
    games: int
    best_so_far: np.ndarray
    mean_so_far: np.ndarray
    best_equivalence: float | None
    mean_equivalence: float | None


def learning_speed(
    medians: dict[tuple[str, str], np.ndarray], random_scores
) -> list[LearningSpeed]:
    """Figure 4 from the (game, variant) -> median curves. Per game the baseline is the UNIFORM
    variant's median curve: its maximum is 100 % for the left panel, its mean over all of
    training for the right one, so uniform itself reaches 100 % by the end. Games without a
    uniform run, or whose baseline is the random score (nothing to normalize by), are left out."""
    baselines = {}
    for (game, variant), curve in medians.items():
        reference = (np.nanmax(curve), np.nanmean(curve))
        if variant == UNIFORM and all(abs(r - random_scores[game]) > 1e-9 for r in reference):
            baselines[game] = reference
    speeds = []
    for variant in sorted({variant for _, variant in medians}, key=lambda v: (v != UNIFORM, v)):
        games = sorted(g for g, v in medians if v == variant and g in baselines)
        if not games:
            continue
        so_far = []
        for i, accumulate in enumerate((running_max, running_mean)):
            scores = [accumulate(medians[game, variant]) for game in games]
            references = [(random_scores[game], baselines[game][i]) for game in games]
            so_far.append(
                median([normalized(s, *r) for s, r in zip(scores, references, strict=True)])
            )
        speeds.append(LearningSpeed(variant, len(games), *so_far, *map(equivalence_point, so_far)))
    return speeds
