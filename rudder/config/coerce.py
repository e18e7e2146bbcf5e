"""Values given to a config (a YAML file, ``--set``) made into the field types, and dotted
``--set`` overrides.

:func:`build` maps a nested dict onto a config dataclass: unknown keys are an error that
lists the valid ones (and the nearest), and every value is coerced to its field's
annotation (:func:`coerce`). :func:`check_section` checks an object built directly (a
:class:`rudder.config.ModelConfig` read from a checkpoint) against the same types and rules.
Every failure is a :class:`ConfigError` naming the key and its valid values.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from typing import Any

import yaml

from rudder.config.fields import Rule, hints, is_section
from rudder.config.yaml_io import parse_yaml
from rudder.errors import ConfigError
from rudder.languages import check_languages

_PLURALS = {str: "strings", int: "integers", float: "numbers"}


def type_name(hint) -> str:
    """A field type in words, as error messages give it ("an integer", "a list of strings")."""
    if hint is type(None):
        return "null"
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in args)
    if typing.get_origin(hint) is list:
        return f"a list of {_PLURALS[args[0]]}"
    if typing.get_origin(hint) is dict:
        return f"a mapping of {_PLURALS[args[0]]} to {_PLURALS[args[1]]}"
    return {bool: "true or false", int: "an integer", float: "a finite number", str: "a string",
            dict: "a mapping"}[hint]


def coerce(value, hint, strict: bool = False):
    """``value`` as type ``hint``, or raise ``TypeError``. A float field takes an int or
    (unless ``strict``) a numeric string ("1e-3", as PyYAML's own loader reads it) but no
    nan or inf; ``bool`` is never a number."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        return coerce(value, next(a for a in args if a is not type(None)), strict)
    if origin is list:
        if not isinstance(value, list):
            raise TypeError
        return [coerce(item, args[0], strict) for item in value]
    if origin is dict:
        if not isinstance(value, dict):
            raise TypeError
        return {coerce(k, args[0], strict): coerce(v, args[1], strict) for k, v in value.items()}
    if hint is float and isinstance(value, (int, float, str)) and not isinstance(value, bool):
        if strict and isinstance(value, str):
            raise TypeError
        try:
            number = float(value)
        except ValueError:
            raise TypeError from None
        if not math.isfinite(number):
            raise TypeError
        return number
    if isinstance(value, hint) and not (hint is int and isinstance(value, bool)):
        return value
    raise TypeError


def typed(key: str, value, hint, rule: Rule | None, strict: bool = False):
    """``value`` coerced to the field's type, or a ConfigError naming the key."""
    try:
        return coerce(value, hint, strict)
    except TypeError:
        if rule and (rule.options() is not None or rule.languages):
            valid = rule.describe()
        else:
            valid = type_name(hint) + (f" {rule.describe()}" if rule else "")
        quote = " (quote it to pass a string)" if hint is str and value is not None else ""
        raise ConfigError(f"{key}={value!r} is not valid; expected {valid}{quote}") from None


def check_rule(key: str, value, rule: Rule) -> None:
    """A ConfigError naming ``key`` unless ``value`` (already of the field's type) obeys
    ``rule``."""
    if rule.languages:
        check_languages(value, where=key)
    if not rule.allows(value):
        raise ConfigError(f"{key}={value!r} is not valid; expected {rule.describe()}")


def check_section(obj, prefix: str) -> None:
    """Check every field of a config object built directly against its type (strictly: no
    conversion) and its rule, except rules naming a registry (:func:`rudder.config.from_dict`
    checks those)."""
    for item in dataclasses.fields(obj):
        key, value = f"{prefix}{item.name}", getattr(obj, item.name)
        rule = item.metadata.get("rule")
        typed(key, value, hints(type(obj))[item.name], rule, strict=True)
        if rule is not None and rule.registry is None:
            check_rule(key, value, rule)


def build(cls, data: dict, path: str = ""):
    """An instance of the config dataclass ``cls`` from a nested dict, every value coerced
    to its field's type (``path``: the dotted prefix of ``cls``'s keys)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path.rstrip('.') or 'config'} must be a mapping, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    names = list(fields)
    unknown = sorted(set(data) - set(names))
    if unknown:
        where = f" in {path.rstrip('.')}" if path else ""
        guesses = [g for key in unknown for g in difflib.get_close_matches(str(key), names, 1)]
        hint = f" (did you mean {', '.join(map(repr, guesses))}?)" if guesses else ""
        raise ConfigError(f"unknown key(s) {unknown}{where}{hint}; valid keys: {names}")
    kwargs = {}
    for key, value in data.items():
        hint = hints(cls)[key]
        if is_section(hint):
            kwargs[key] = build(hint, value, f"{path}{key}.")
        else:
            kwargs[key] = typed(f"{path}{key}", value, hint, fields[key].metadata.get("rule"))
    try:
        return cls(**kwargs)
    except ValueError as error:  # a section that checks itself (ModelConfig)
        raise ConfigError(str(error)) from None


def apply_override(data: dict, assignment: str) -> None:
    """Apply ``a.b=value`` (value parsed as YAML) to a nested dict in place."""
    if "=" not in assignment:
        raise ConfigError(f"override {assignment!r} must look like key.subkey=value")
    key, raw = assignment.split("=", 1)
    try:
        value: Any = parse_yaml(raw) if raw != "" else None
    except yaml.YAMLError:
        raise ConfigError(
            f"override {assignment!r}: the value is not valid YAML (quote it)") from None
    parts = key.strip().split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {assignment!r}: {part!r} is not a section")
    node[parts[-1]] = value
