"""Reports over train.py runs: `python -m reporting MULTIRUN_DIR` (the sweep report), `python -m
reporting export RUNS --out results` (publishable files), `python -m reporting published
results` (the exported Atari runs beside Dopamine's published curves) and `python -m reporting
minatar results` (the exported MinAtar runs: prioritized against uniform, beside MinAtar's
published DQN); and evaluate.py's score table (`score_table.py`).

One pipeline: `export.py` is the one reader of runs' TensorBoard events, `results.py` the one
reader of exported runs (of any family), and `report.py` the one builder every report kind
(`published.py`, `minatar.py`, `sweep_report.py`) writes its document and figures with."""
