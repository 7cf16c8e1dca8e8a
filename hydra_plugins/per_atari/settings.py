"""The settings' defaults as Hydra configs (`training.config_defaults`), stored where
Hydra looks at every start, so that every composition of configs/ (train.py's, the compose
API's) finds the configs its defaults lists build on."""

from training.config_defaults import register_defaults

register_defaults()
