"""TensorBoard figures of the replay memory, after the paper's Figures 10 and 11."""

import numpy as np


def _axes():
    """A new figure; matplotlib is imported here, not at start-up (it costs a second)."""
    import matplotlib

    matplotlib.use("Agg")  # training runs headless
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(5, 3.5))


def sorted_td_errors_figure(errors: np.ndarray):
    """Last-seen |δ| of every replayed transition in memory, sorted (Figure 10)."""
    errors = np.sort(errors[np.isfinite(errors)])[::-1]
    figure, axes = _axes()
    axes.plot(np.linspace(0, 1, len(errors)), errors)
    axes.set(xlabel="fraction of replayed transitions, sorted", ylabel="last-seen |δ|")
    figure.tight_layout()
    return figure


def replay_rate_figure(errors: np.ndarray, rate: np.ndarray, bins: int = 20):
    """Replays per added transition since insertion, against last-seen |δ| (cf. Figure 11)."""
    seen = np.isfinite(errors)
    figure, axes = _axes()
    if seen.any():
        edges = np.linspace(0, errors[seen].max() + 1e-9, bins + 1)
        which = np.digitize(errors[seen], edges) - 1
        counts = np.bincount(which, minlength=bins)[:bins]
        sums = np.bincount(which, weights=rate[seen], minlength=bins)[:bins]
        centres = (edges[:-1] + edges[1:]) / 2
        axes.plot(centres[counts > 0], sums[counts > 0] / counts[counts > 0], marker="o")
    axes.set(xlabel="last-seen |δ|", ylabel="replays per added transition")
    figure.tight_layout()
    return figure
