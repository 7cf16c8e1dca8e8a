"""The project's Hydra plugins: Hydra finds plugins only in the hydra_plugins namespace."""
