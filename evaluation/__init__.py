"""Evaluation of trained agents: snapshots, the no-op and human-starts protocols, reports.

The evaluator is plain functions with their own env and generator; it never imports `replay`.
"""

from evaluation.protocols import (
    HUMAN_STARTS_EPSILON,
    NOOP_EPSILON,
    EvaluationResult,
    evaluate_human_starts,
    evaluate_noop,
)
from evaluation.snapshot import SnapshotInfo, load_agent_snapshot, save_agent_snapshot

__all__ = [
    "HUMAN_STARTS_EPSILON",
    "NOOP_EPSILON",
    "EvaluationResult",
    "SnapshotInfo",
    "evaluate_human_starts",
    "evaluate_noop",
    "load_agent_snapshot",
    "save_agent_snapshot",
]
