"""Reports over Hydra multirun sweeps of train.py: `python -m reporting MULTIRUN_DIR`."""
