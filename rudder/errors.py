"""The one error base class of rudder and how command lines report it.

Every error a user can fix (a bad config value, an unusable run folder or checkpoint, a
malformed dataset, an unsupported language) derives from :class:`RudderError`; every CLI
(``rudder.train``, ``rudder.evaluate``, ``python -m app``, ``heuristics``,
``datasets_scripts``, ``experiments.run``) prints it as one line and exits with code 2.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_CODE = 2


class RudderError(ValueError):
    """An input, config, dataset or run that cannot be used as asked (a user's to fix)."""


class ConfigError(RudderError):
    """A configuration key or value that cannot be used."""


class RunError(RudderError):
    """A run directory or checkpoint that cannot be used as asked."""


def one_line(error: BaseException) -> str:
    """The error's message on a single line (whitespace runs collapsed)."""
    return " ".join(str(error).split())


@contextmanager
def exit_on_error() -> Iterator[None]:
    """Turn a :class:`RudderError` into ``error: <one line>`` on stderr and exit code 2."""
    try:
        yield
    except RudderError as error:
        print(f"error: {one_line(error)}", file=sys.stderr)
        raise SystemExit(EXIT_CODE) from None
