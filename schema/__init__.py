"""Settings with one definition each. A config section's settings are a dataclass, a Hydra
structured config: each field is a key, with its type, its default (MISSING: Hydra's `???`,
which every preset gives) and its rule (`setting`). `typed` reads a section into it: OmegaConf
checks the keys and the types, the rules the values; a refusal is one line naming the key."""

from __future__ import annotations

import dataclasses
import importlib
import math
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, TypeVar

from omegaconf import OmegaConf
from omegaconf.errors import MissingMandatoryValue, ValidationError

# A longer value is shown by its start and its length (one pasted by mistake can be megabytes).
SHOWN_CHARACTERS, SHOWN_START = 1000, 80
# numpy and torch take integers as signed 64-bit: a larger one would overflow where it is used.
INTEGER_LIMIT = 2**63


def shown(value: Any) -> str:
    """`value` as a message shows it: whole, unless longer than SHOWN_CHARACTERS."""
    text = str(value)
    long = len(text) > SHOWN_CHARACTERS
    return f"{text[:SHOWN_START]}... ({len(text)} characters)" if long else text


def refusal(key: str, value: Any, allowed: str) -> ValueError:
    """`key=value is not allowed: must be <allowed>`, the three kept (`typed` shows the value)."""
    error = ValueError(f"{shown(key)}={shown(value)} is not allowed: must be {allowed}")
    error.key, error.value, error.allowed = key, value, allowed
    return error


@dataclasses.dataclass(frozen=True)
class Rule:
    """What a setting may be beyond its type: `test` says whether a value is allowed (or raises
    a one-line ValueError saying more); `allowed` (`text`, or a function) ends "must be ..."."""

    text: str | Callable[[], str]
    test: Callable[[Any], bool]

    @property
    def allowed(self) -> str:
        return self.text() if callable(self.text) else self.text

    def check(self, key: str, value: Any) -> None:
        try:
            allowed = self.test(value)
        except TypeError:  # a value of another type, where OmegaConf has not read it
            allowed = False
        if not allowed:
            raise refusal(key, value, self.allowed)


# `type(v) is int`: not a bool, where OmegaConf has not read the value (a tool's own key)
POSITIVE_INTEGER = Rule("a positive integer", lambda v: type(v) is int and v > 0)
NON_NEGATIVE_INTEGER = Rule("an integer >= 0", lambda v: type(v) is int and v >= 0)
POSITIVE_NUMBER = Rule("a number > 0", lambda v: math.isfinite(v) and v > 0)
NON_NEGATIVE_NUMBER = Rule(">= 0", lambda v: math.isfinite(v) and v >= 0)
FRACTION = Rule("in [0, 1]", lambda v: 0 <= v <= 1)
BOOLEAN = Rule("true or false", lambda v: isinstance(v, bool))
PATH = Rule("a path", lambda v: "\0" not in v)  # what the operating system can be given
DEVICE = Rule("auto, cpu, cuda or cuda:N", lambda v: re.fullmatch("auto|cpu|cuda(:[0-9]+)?", v))


def one_of(names: Iterable[str], filled_by: str = "") -> Rule:
    """One of `names`, looked up when checked, after module `filled_by` has registered them."""

    def known() -> Iterable[str]:
        if filled_by:
            importlib.import_module(filled_by)
        return names

    return Rule(lambda: f"one of {', '.join(known())}", lambda v: v in known())


def setting(default: Any, rule: Rule, *marks: str) -> Any:
    """A settings field; `marks` put it in lists of settings (`training.run_state.marked`)."""
    return dataclasses.field(default=default, metadata={"rule": rule, "marks": marks})


@dataclasses.dataclass(frozen=True)
class Settings:
    """The settings of config section `section` ("" for the top level). Invariant: an
    instance made by `typed` holds only allowed values."""

    section: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value, rule = getattr(self, field.name), field.metadata["rule"]
            if value is None:  # OmegaConf allows it only where the type is Optional
                continue
            rule.check(self.key(field.name), value)
            if isinstance(value, int) and value >= INTEGER_LIMIT:
                allowed = f"{rule.allowed}, at most {INTEGER_LIMIT - 1}"
                raise refusal(self.key(field.name), value, allowed)
        self.check_together()

    def check_together(self) -> None:
        """Rules between this section's own settings (a subclass adds them)."""

    @classmethod
    def key(cls, name: str) -> str:
        return f"{cls.section}.{name}" if cls.section else name

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Each setting's default, Hydra's `???` where every preset gives it."""
        return OmegaConf.to_container(OmegaConf.structured(cls))


S = TypeVar("S", bound=Settings)


def typed(
    schema: type[S], values: Mapping[str, Any], complete: bool = False, fixed: tuple = ()
) -> S:
    """`values` (plain and resolved) as `schema`, the others at their defaults unless
    `complete`; `fixed` names settings the values may not give (a kind chosen elsewhere). A
    key it does not have, one missing, a value of another type (booleans are only true and
    false, not yes or 1) or one its rule refuses is a one-line ValueError showing the value."""
    names = [field.name for field in dataclasses.fields(schema) if field.name not in fixed]
    section, types = schema.section or "the config", typing.get_type_hints(schema)
    for name, value in values.items():
        if name not in names:
            has = ", ".join(sorted(names))
            raise ValueError(f"{schema.key(name)} is not a setting; {section} has: {has}")
        if types[name] is bool and not isinstance(value, bool):
            raise refusal(schema.key(name), value, BOOLEAN.allowed)
    for name in names if complete else ():
        if name not in values:
            raise ValueError(f"{schema.key(name)} is not set")
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), values))
    except MissingMandatoryValue as error:  # a `???` no preset gave
        raise ValueError(f"{schema.key(error.key)} is not set") from None
    except ValidationError as error:  # a value OmegaConf cannot convert to the type
        rule = next(f.metadata["rule"] for f in dataclasses.fields(schema) if f.name == error.key)
        raise refusal(schema.key(error.key), values.get(error.key), rule.allowed) from None
    except ValueError as error:  # a rule's, on the value as OmegaConf converted it (1 -> 1.0)
        if not hasattr(error, "allowed"):
            raise
        name = error.key.removeprefix(f"{schema.section}.")
        raise refusal(error.key, values.get(name, error.value), error.allowed) from None
