"""The resolved config as plain nested namespaces, for the loop's hot path."""

from types import SimpleNamespace

from omegaconf import DictConfig, OmegaConf


def plain_config(cfg: DictConfig) -> SimpleNamespace:
    """The resolved config as nested namespaces: the same attribute paths, read at once."""

    def convert(value):
        if isinstance(value, dict):
            return SimpleNamespace(**{key: convert(item) for key, item in value.items()})
        return value

    return convert(OmegaConf.to_container(cfg, resolve=True))


def select(config: SimpleNamespace, key: str):
    """The value at a dotted `key`, or None where the config has no such key."""
    for part in key.split("."):
        config = getattr(config, part, None)
    return config
