"""Reports over train.py runs: `python -m reporting MULTIRUN_DIR` (the sweep report), `python -m
reporting export RUNS --out results` (publishable files), `python -m reporting published
results` (the exported Atari runs beside Dopamine's published curves) and `python -m reporting
minatar results` (the exported MinAtar runs: prioritized against uniform, beside MinAtar's
published DQN)."""
