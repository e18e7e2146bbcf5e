"""Progress bars for long steps: tqdm on stderr, drawn only when stderr is a terminal (a log
file or a pipe gets nothing)."""

from __future__ import annotations

import sys

from tqdm import tqdm


def is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def progress(iterable=None, *, total=None, desc=None, unit="it", leave=False, stream=None):
    """A :class:`tqdm.tqdm` over ``iterable`` (or updated by hand up to ``total``) on
    ``stream`` (default: the current ``sys.stderr``), disabled when that is not a terminal."""
    stream = sys.stderr if stream is None else stream
    return tqdm(iterable, total=total, desc=desc, unit=unit, leave=leave, file=stream,
                disable=not is_terminal(stream), dynamic_ncols=True)
