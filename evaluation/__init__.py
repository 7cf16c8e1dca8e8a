"""Evaluation of trained agents: the no-op and human-starts protocols, human-normalized scores,
raw-score episodes for env kinds without human reference (MinAtar), loading snapshots.

- `protocol_registry.py`: ``PROTOCOLS``, one ``Protocol`` record per protocol, what
  `evaluate.py` and its score table read everything about a protocol from;
- `protocols.py`: the evaluators, plain functions with their own env and generator;
- `scores.py`: the reference tables, human-normalized scores and the PER paper's Table 7;
- `snapshot.py`, `runs.py`, `arguments.py`: `evaluate.py`'s parts (its score table is
  `reporting.score_table`);
- `human_starts/`: human start points, from play to a verified start-state file, and their
  commands (``python -m evaluation.human_starts``).

It never imports `replay`, `training` or `reporting`. Nothing is imported here, so that
`reporting` can use `evaluation.scores` without loading torch.
"""
