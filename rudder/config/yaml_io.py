"""Config files and ``--set`` values read with YAML 1.2's core-schema scalars
(:func:`parse_yaml`), and written so that they read back equal (:func:`dump_yaml`).

``1e-3`` is a float, ``010`` is 10, and ``yes``, ``off``, ``1:30`` or ``2024-01-01`` are
strings, where PyYAML's YAML 1.1 would read a string, 8, a boolean, 90 and a date.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path

import yaml

from rudder.errors import ConfigError


class _CoreSchemaLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 core-schema booleans, integers and floats (and,
    as in that schema, no implicit dates)."""

    yaml_implicit_resolvers: typing.ClassVar[dict] = {
        first: [(tag, regexp) for tag, regexp in resolvers
                if tag.rsplit(":", 1)[-1] not in ("bool", "int", "float", "timestamp")]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_yaml_int(self, node):
        text = self.construct_scalar(node)
        sign, digits = (-1, text[1:]) if text[0] == "-" else (1, text.lstrip("+"))
        base = {"0x": 16, "0o": 8}.get(digits[:2], 10)
        return sign * int(digits[2:] if base != 10 else digits, base)


_CoreSchemaLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"))
_CoreSchemaLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"))
_CoreSchemaLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
               r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."))
_CoreSchemaLoader.add_constructor("tag:yaml.org,2002:int", _CoreSchemaLoader.construct_yaml_int)


class _CoreSchemaDumper(yaml.SafeDumper):
    """PyYAML's safe dumper that quotes every string :class:`_CoreSchemaLoader` would read
    as something else ("09", "1e3", "-.5"), so :func:`dump_yaml` round-trips."""

    yaml_implicit_resolvers = _CoreSchemaLoader.yaml_implicit_resolvers


def parse_yaml(text: str):
    """``text`` parsed as YAML with the 1.2 core schema's scalars (see the module)."""
    return yaml.load(text, Loader=_CoreSchemaLoader)  # a SafeLoader: builds no objects


def dump_yaml(data) -> str:
    """``data`` as YAML that :func:`parse_yaml` reads back equal (keys in their order)."""
    return yaml.dump(data, Dumper=_CoreSchemaDumper, sort_keys=False, allow_unicode=True)


MAX_CONFIG_BYTES = 1 << 20  # 1 MiB: real configs are a few KB; PyYAML reads ~100 KB/s


def load_yaml(path, max_bytes: int = MAX_CONFIG_BYTES) -> dict:
    """Read a YAML config file (UTF-8, at most ``max_bytes``) as a dict, naming the file on
    errors."""
    path = Path(path)
    try:
        if path.is_dir():
            raise ConfigError(f"config file {path} is a folder; name a YAML file")
        size = path.stat().st_size
        if size > max_bytes:
            raise ConfigError(f"config file {path} has {size:,d} bytes, over the limit of "
                              f"{max_bytes:,d}; a config is a few KB of YAML: is it the right "
                              "file?")
        data = parse_yaml(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except UnicodeDecodeError as error:
        byte = error.object[error.start]
        raise ConfigError(f"config file {path} is not UTF-8 text (byte {byte:#04x} at offset "
                          f"{error.start}); save it as UTF-8") from None
    except OSError as error:
        raise ConfigError(
            f"config file {path} cannot be read ({error.strerror or error})") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: invalid YAML ({error})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return data
