"""A :class:`Registry`: the entries of one plug point by name, which a config key picks from
(``model.name``, ``optim.name``, ``optim.scheduler``, ``optim.implementation``; the
registries themselves are declared with their entry types in :mod:`rudder.config.schema`).

A registry is declared in the config, below the parts whose entries it holds, so that the
config's rules (:class:`rudder.config.fields.Rule`) can name it without importing them. The
part that owns the entries (``rudder.models``, ``rudder.training.optim``, of higher layers)
registers them when it is imported, under the declared entry type, so mypy checks each one;
reading a registry imports its owner first, so its entries are there whoever reads it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import Generic, TypedDict, TypeVar

from rudder.errors import ConfigError

T = TypeVar("T")


class Registry(MutableMapping[str, T], Generic[T]):
    """Entries by name for the config key ``key``, filled by the module that owns them; the
    owner calls it ``where`` (``"rudder.training.optim.OPTIMIZERS"``, which docs/config.md
    names)."""

    def __init__(self, key: str, where: str):
        self.key = key
        self.where = where
        self.owner = where.rpartition(".")[0]
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        """Add ``entry`` as ``name`` (a name already taken is an error); returns ``entry``."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.where}: an entry's name must be a non-empty string, "
                             f"got {name!r}")
        if name in self._entries:
            raise ValueError(f"{self.where}: {name!r} is registered twice")
        self._entries[name] = entry
        return entry

    def pick(self, name: str) -> T:
        """The entry ``name``, or a :class:`ConfigError` naming the key and the valid names."""
        entries = self._filled()
        if name not in entries:
            raise ConfigError(f"{self.key}={name!r} is not valid; expected one of {list(entries)}")
        return entries[name]

    def _filled(self) -> dict[str, T]:
        importlib.import_module(self.owner)  # registers the owner's entries (once)
        return self._entries

    def __getitem__(self, name: str) -> T:
        return self._filled()[name]

    def __setitem__(self, name: str, entry: T) -> None:
        self._entries[name] = entry

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._filled())

    def __len__(self) -> int:
        return len(self._filled())

    def __contains__(self, name: object) -> bool:
        return name in self._filled()

    # One registry is one object: compared and hashed by identity (a Rule holding it is
    # frozen, so hashable), never by entries, which would import the owner.
    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"Registry({self.key!r}, {self.where!r})"


class Implementation(TypedDict, total=False):
    """How torch runs the update: the optimiser's keyword arguments."""

    fused: bool
    foreach: bool
