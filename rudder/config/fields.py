"""One config field in one place: :func:`setting` declares a dataclass field with its
default, its :class:`Rule` (valid values) and its description; :func:`leaves` walks a
config class's fields by dotted key. The type is the field's annotation.

Validation (:mod:`rudder.config.coerce`, :mod:`rudder.config.validate`) and the
generated reference page (:mod:`rudder.config.reference`, docs/config.md) read these.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Collection, Iterator
from dataclasses import MISSING, dataclass
from typing import Any

from rudder.config.registry import Registry
from rudder.languages import SUPPORTED


@dataclass(frozen=True)
class Rule:
    """Valid values of one key: a closed range (``low``/``high``; ``low_open`` and
    ``high_open`` exclude an end), a set of ``choices``, the names of a ``registry``
    (:mod:`rudder.config.registry`, read when checked, so a new entry is valid at once),
    or languages (every item a supported code)."""

    low: float | None = None
    high: float | None = None
    high_open: bool = False
    low_open: bool = False
    choices: tuple | None = None
    registry: Registry[Any] | None = None
    languages: bool = False
    non_empty: bool = False

    def options(self) -> Collection | None:
        """The valid choices (a registry's live keys), or None for a range or languages."""
        if self.registry is not None:
            return self.registry.keys()
        return self.choices

    def describe(self) -> str:
        options = self.options()
        if options is not None:
            return f"one of {list(options)}"
        if self.languages:
            return f"a {'non-empty ' if self.non_empty else ''}list of codes from {list(SUPPORTED)}"
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low}"
        return (f"in {'(' if self.low_open else '['}{self.low}, "
                f"{self.high}{')' if self.high_open else ']'}")

    def allows(self, value) -> bool:
        if value is None:  # only optional fields get here with None (types are checked first)
            return True
        options = self.options()
        if options is not None:
            return value in options
        if self.languages:
            return bool(value) or not self.non_empty
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        below = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return above and below


def at_least(low) -> Rule:
    return Rule(low=low)


def fraction(high_open: bool = False, low_open: bool = False) -> Rule:
    return Rule(low=0.0, high=1.0, high_open=high_open, low_open=low_open)


def one_of(*choices: str) -> Rule:
    return Rule(choices=choices)


def setting(default: Any = MISSING, *, doc: str, rule: Rule | None = None,
            factory: Callable[[], Any] | None = None) -> Any:
    """A dataclass field with its description (``doc``, the meaning in docs/config.md) and
    its ``rule``; ``factory`` makes a mutable default (a list, a dict, a section)."""
    metadata = {"doc": doc, "rule": rule}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


_HINTS: dict[type, dict[str, Any]] = {}


def hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of a config dataclass (cached)."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def is_section(hint) -> bool:
    """A field that holds another config dataclass (``data``, ``model``, ...)."""
    return dataclasses.is_dataclass(hint)


def leaves(cls: type, prefix: str = "") -> Iterator[tuple[str, dataclasses.Field, Any]]:
    """``(dotted key, field, type)`` of every value field of ``cls``, sections expanded,
    in declaration order."""
    types = hints(cls)
    for item in dataclasses.fields(cls):
        hint = types[item.name]
        if is_section(hint):
            yield from leaves(hint, f"{prefix}{item.name}.")
        else:
            yield f"{prefix}{item.name}", item, hint


def value_at(config, key: str):
    """The value of a dotted ``key`` of a config object."""
    for part in key.split("."):
        config = getattr(config, part)
    return config
