"""Every test that composes configs/ with Hydra's compose API finds the schemas' defaults the
config files build on, as train.py stores them before Hydra composes."""

from launch.config_defaults import register_defaults

register_defaults()
