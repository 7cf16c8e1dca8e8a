"""Atari and MinAtar environments (by `env.kind`: `envs.registry`), the acting-side frame stack
and the games' ids (their reference scores are in `evaluation.scores`)."""
