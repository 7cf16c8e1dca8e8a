"""``key=value`` command-line arguments, read by the override parser of train.py's Hydra, so
that a value means what it means there (``episodes=30`` an int, ``start_states=null`` None,
``env.max_episode_frames=400`` nested). Any other argument is positional."""

from __future__ import annotations

import re
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def parse_arguments(argv: list[str], defaults: dict) -> tuple[list[str], dict]:
    """Positional arguments, and ``defaults`` updated by ``key=value`` ones; a default that is a
    dict is an open section, whose ``section.KEY`` is checked where it is used."""
    sections = [key for key, value in defaults.items() if isinstance(value, dict)]
    positional, values = [], dict(defaults)
    for argument in argv:
        if _is_path(argument):
            positional.append(argument)
            continue
        key, value = _key_and_value(argument)
        section, dot, rest = key.partition(".")
        if dot and section in sections and rest:
            values[section] = {**values[section], rest: value}
        elif key in defaults and key not in sections:
            values[key] = value
        else:
            allowed = sorted(k for k in defaults if k not in sections)
            allowed += [f"{section}.<key>" for section in sections]
            raise ValueError(f"unknown argument {key!r}: allowed keys are {', '.join(allowed)}")
    return positional, values


def _is_path(argument: str) -> bool:
    """A path, not an override: no ``=``, or an existing file (Hydra's multirun directories
    are named like ``replay=uniform,seed=0``), or a left side that is no dotted name."""
    key = argument.partition("=")[0]
    return "=" not in argument or Path(argument).exists() or not _KEY.fullmatch(key.strip())


def _key_and_value(argument: str) -> tuple[str, object]:
    """The key and the single value of ``key=value``, or a one-line ValueError."""
    try:
        override: Override = OverridesParser.create().parse_override(argument.strip())
    except HydraException as error:
        reason = str(error).strip().splitlines()[-1]
        raise ValueError(f"{argument} is not a key=value argument: {reason}") from None
    value = None if override.is_sweep_override() else override.value()
    if override.is_sweep_override() or isinstance(value, dict | list):
        raise ValueError(f"{argument.strip()} is not allowed: must be a single value")
    return override.key_or_group, value
