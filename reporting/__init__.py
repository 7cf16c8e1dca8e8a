"""Reports over train.py runs: `python -m reporting MULTIRUN_DIR` (the sweep report), `python -m
reporting export RUNS --out results` (publishable files), `python -m reporting published
results` (the exported Atari runs beside Dopamine's published curves) and `python -m reporting
minatar results` (the exported MinAtar runs: prioritized against uniform, beside MinAtar's
published DQN); and evaluate.py's score table (`score_table.py`).

One pipeline: `export.py` is the one reader of runs' TensorBoard events, and every report reads
exported runs through `results.py` (the sweep report exports its multirun into a scratch
directory first). The reports share `markdown.py` (table cells) and `plots.py` (colours)."""
