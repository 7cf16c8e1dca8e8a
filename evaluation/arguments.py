"""``key=value`` command-line arguments, the override syntax train.py's Hydra uses.

An argument that is an existing path, or has no ``=``, is positional. Values are parsed as
YAML scalars (``episodes=30`` is an int, ``device=cpu`` a string,
``score=null`` None); dotted keys nest (``env.max_episode_frames=400``). Unknown keys are a
one-line error naming the key and the allowed ones; an open section's keys (``env.*``) are
checked where they are used, against the env kind's settings (`envs.settings`).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def parse_arguments(
    argv: list[str], defaults: dict, *, open_sections: tuple[str, ...] = ()
) -> tuple[list[str], dict]:
    """Split ``argv`` into positional arguments and ``defaults`` updated by ``key=value`` ones.

    Keys must exist in ``defaults``, except below a section named in ``open_sections`` (e.g.
    ``env``, whose keys are the env kind's settings, checked where they are used).
    """
    positional, values = [], {key: value for key, value in defaults.items()}
    for argument in argv:
        if _is_path(argument):
            positional.append(argument)
            continue
        key, _, text = argument.partition("=")
        key = key.strip()
        section, dot, rest = key.partition(".")
        if dot and section in open_sections and rest:
            values.setdefault(section, {})
            values[section] = {**values[section], rest: _scalar(key, text)}
        elif key in defaults and not isinstance(defaults[key], dict):
            values[key] = _scalar(key, text)
        else:
            allowed = sorted(k for k in defaults if k not in open_sections)
            allowed += [f"{section}.<key>" for section in open_sections]
            raise ValueError(f"unknown argument {key!r}: allowed keys are {', '.join(allowed)}")
    return positional, values


def _is_path(argument: str) -> bool:
    """A path, not an override: no ``=``, or an existing file (Hydra's multirun directories
    are named like ``replay=uniform,seed=0``), or a left side that is no dotted name."""
    key = argument.partition("=")[0]
    return "=" not in argument or Path(argument).exists() or not _KEY.fullmatch(key.strip())


def _scalar(key: str, text: str):
    try:
        value = yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError:
        return text
    if isinstance(value, dict | list):
        raise ValueError(f"{key}={text} is not allowed: must be a single value")
    return value
