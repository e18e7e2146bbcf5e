"""Reading the text files users hand to ``python -m heuristics`` (CoNLL-U, CSV, TSV, JSONL)."""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO


@contextmanager
def open_text(path, error: type[Exception], newline: str | None = None) -> Iterator[TextIO]:
    """``path`` opened as UTF-8 text, a byte-order mark (Windows editors, Excel) skipped.

    Bytes that are not UTF-8, met while the block reads, raise ``error`` naming the file and
    the line of the first bad byte.
    """
    path = Path(path)
    try:
        with path.open(encoding="utf-8-sig", newline=newline) as handle:
            yield handle
    except UnicodeDecodeError:
        data = path.read_bytes().removeprefix(codecs.BOM_UTF8)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as bad:
            line = data.count(b"\n", 0, bad.start) + 1
            raise error(
                f"{path}:{line}: not UTF-8 text (byte 0x{data[bad.start]:02x}); "
                "re-save the file as UTF-8"
            ) from None
        raise  # the file is fine: the block decoded something else


def read_text(path, error: type[Exception]) -> str:
    """The whole of ``path`` as :func:`open_text` reads it."""
    with open_text(path, error) as handle:
        return handle.read()
