"""What the reports' figures share: the paper's colour for each replay kind, the labels, and the
colours of variants and published curves. Each report draws its own figures (with matplotlib's
`Figure`, no pyplot: no global state, no display backend) and imports only this from the others.
"""

from collections.abc import Sequence

# The paper's colours: black uniform, red rank-based, blue proportional.
COLOURS = {"uniform": "black", "rank_based": "red", "proportional": "blue"}
LABELS = {
    "uniform": "uniform (Double DQN)",
    "rank_based": "rank-based",
    "proportional": "proportional",
}
DOPAMINE_COLOURS = {"DQN": "darkorange", "Rainbow": "purple"}
PUBLISHED_DQN_COLOUR = DOPAMINE_COLOURS["DQN"]  # any published DQN, Dopamine's or MinAtar's
# For a second variant of one replay kind in a figure (another target rule or priority signal).
OTHER_COLOURS = ("tab:green", "tab:cyan", "tab:brown", "tab:pink", "tab:olive", "tab:gray")


def _colour(kind: str) -> str:
    return COLOURS.get(kind, "grey")


def label(name: str) -> str:
    """A variant's name in a legend: the replay kind's label for the paper's settings."""
    return LABELS.get(name, name)


def variant_colours(variants: Sequence[tuple[str, str]]) -> dict[str, str]:
    """(variant name, replay kind) in drawing order -> colour: the first variant of each kind
    the paper's colour of its kind, every other one the next of OTHER_COLOURS, so that no two
    variants of one figure share a colour (up to their number)."""
    colours, spare = {}, iter(OTHER_COLOURS)
    for name, kind in variants:
        taken = _colour(kind) in colours.values() or kind not in COLOURS
        colours[name] = next(spare, "grey") if taken else _colour(kind)
    return colours
