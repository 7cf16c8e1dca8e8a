"""Evaluation of trained agents: the no-op and human-starts protocols, reports.

The evaluator is plain functions with their own env and generator, fed agent snapshots
(`artifacts.snapshot`); it never imports `replay` or `training`.
"""

from artifacts.snapshot import SnapshotInfo
from evaluation.protocols import (
    HUMAN_STARTS_EPSILON,
    NOOP_EPSILON,
    EvaluationResult,
    evaluate_human_starts,
    evaluate_noop,
)
from evaluation.snapshot import load_agent_snapshot

__all__ = [
    "HUMAN_STARTS_EPSILON",
    "NOOP_EPSILON",
    "EvaluationResult",
    "SnapshotInfo",
    "evaluate_human_starts",
    "evaluate_noop",
    "load_agent_snapshot",
]
