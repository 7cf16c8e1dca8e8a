"""Settings with one definition each. A config section's schema is a frozen dataclass whose
fields are the section's keys: each field's type, default and rule (`setting`). Building one
checks every value, so the up-front validation of a run and the component built from the
section refuse a value with the same rule, in one line naming the key and what is allowed.

A field without a default is one every preset must give (Hydra's `???` until it does)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

# A value longer than this is shown by its start and its length: one pasted by mistake can be
# megabytes, and a message stays one readable line.
SHOWN_CHARACTERS = 1000
SHOWN_START = 80


def shown(value: Any) -> str:
    """`value` as a message shows it: whole, unless longer than SHOWN_CHARACTERS."""
    text = str(value)
    if len(text) <= SHOWN_CHARACTERS:
        return text
    return f"{text[:SHOWN_START]}... ({len(text)} characters)"


def refusal(key: str, value: Any, allowed: str) -> ValueError:
    return ValueError(f"{shown(key)}={shown(value)} is not allowed: must be {allowed}")


@dataclasses.dataclass(frozen=True)
class Rule:
    """What a setting may be: `test` says whether a value is allowed, `allowed` completes
    "must be ...". A rule that involves other settings says so in `allowed`; its test sees the
    value alone, and the rest is checked where those settings are known."""

    allowed: str
    test: Callable[[Any], bool]

    def check(self, key: str, value: Any) -> None:
        if not self.test(value):
            raise refusal(key, value, self.allowed)


def is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return (is_integer(value) or isinstance(value, float)) and math.isfinite(value)


# numpy and torch take integer settings as signed 64-bit integers: a larger one would pass a
# rule of its own and overflow where it is used.
INTEGER_LIMIT = 2**63


@dataclasses.dataclass(frozen=True)
class IntegerRule(Rule):
    """Integers below INTEGER_LIMIT that `test` allows (it sees only those; the rule's own
    `test` is the whole check, for rules built on it). A larger integer is refused with the
    limit in the message, as `allowed` does not name it."""

    def __post_init__(self) -> None:
        allows = self.test

        def within(value: Any) -> bool:
            return is_integer(value) and value < INTEGER_LIMIT and allows(value)

        object.__setattr__(self, "test", within)

    def check(self, key: str, value: Any) -> None:
        if is_integer(value) and value >= INTEGER_LIMIT:
            raise refusal(key, value, f"{self.allowed}, at most {INTEGER_LIMIT - 1}")
        super().check(key, value)


POSITIVE_INTEGER = IntegerRule("a positive integer", lambda v: v > 0)
NON_NEGATIVE_INTEGER = IntegerRule("an integer >= 0", lambda v: v >= 0)
POSITIVE_NUMBER = Rule("a number > 0", lambda v: is_number(v) and v > 0)
FRACTION = Rule("in [0, 1]", lambda v: is_number(v) and 0 <= v <= 1)
BOOLEAN = Rule("true or false", lambda v: isinstance(v, bool))


def text(allowed: str) -> Rule:
    """Any string: what it names is resolved (and refused) where it is used."""
    return Rule(allowed, lambda v: isinstance(v, str))


def one_of(names: Iterable[str]) -> Rule:
    names = tuple(names)
    return Rule(f"one of {', '.join(names)}", lambda v: isinstance(v, str) and v in names)


def none_or(rule: Rule, allowed: str) -> Rule:
    return Rule(allowed, lambda v: v is None or rule.test(v))


def setting(default: Any = dataclasses.MISSING, *, rule: Rule) -> Any:
    """A schema field: its default (none: every preset gives it) and its rule."""
    return dataclasses.field(default=default, metadata={"rule": rule})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Schema:
    """The settings of config section `section` ("" for the top level), each checked by its
    rule when built, then `check_together` (rules between them). Invariant: an instance holds
    only allowed values."""

    section: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            self.check(field.name, getattr(self, field.name))
        self.check_together()

    def check_together(self) -> None:
        """Rules between this section's own settings (a subclass adds them)."""

    @classmethod
    def key(cls, name: str) -> str:
        return f"{cls.section}.{name}" if cls.section else name

    @classmethod
    def check(cls, name: str, value: Any) -> None:
        """One setting against its rule (a one-line ValueError naming `section.name`)."""
        rule = next(f for f in dataclasses.fields(cls) if f.name == name).metadata["rule"]
        rule.check(cls.key(name), value)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(field.name for field in dataclasses.fields(cls))

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """The default of every setting, `???` (Hydra's mark of a value to give) where none."""
        return {
            field.name: "???" if field.default is dataclasses.MISSING else field.default
            for field in dataclasses.fields(cls)
        }

    @classmethod
    def of(cls, values: Mapping[str, Any], also: tuple[str, ...] = (), complete: bool = False):
        """The settings in `values`, the others at their defaults unless `complete` (a run's
        whole config, which must hold every setting); `also` names keys of the section that
        are not settings of this schema (the `kind` that chose it). A key in neither would be
        stored and ignored: it is refused."""
        known = (*cls.names(), *also)
        for name in values:
            if name not in known:
                section = cls.section or "the config"
                raise ValueError(
                    f"{cls.key(name)} is not a setting; {section} has: {', '.join(sorted(known))}"
                )
        for name, default in cls.defaults().items():
            if name not in values and (complete or default == "???"):
                raise ValueError(f"{cls.key(name)} is not set")
        return cls(**{name: value for name, value in values.items() if name not in also})
