"""Reports over train.py runs: `python -m reporting MULTIRUN_DIR` (the sweep report), `python -m
reporting export RUNS --out results` (publishable files) and `python -m reporting published
results` (the exported runs beside Dopamine's published curves)."""
