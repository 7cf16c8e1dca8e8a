"""Evaluation of trained agents: the no-op and human-starts protocols, human-normalized scores,
raw-score episodes for env kinds without human reference (MinAtar), loading snapshots, reports.

- `protocol_registry.py`: ``PROTOCOLS``, one ``Protocol`` record per protocol, what
  `evaluate.py` and its score table read everything about a protocol from;
- `protocols.py`: the evaluators, plain functions with their own env and generator;
- `scores.py`: the reference tables, human-normalized scores and the PER paper's Table 7;
- `snapshot.py`, `runs.py`, `arguments.py`, `score_table.py`: `evaluate.py`'s parts;
- `start_states.py`: the start-state commands.

It never imports `replay` or `training`. Nothing is imported here, so that `reporting` can
use `evaluation.scores` without loading torch.
"""
