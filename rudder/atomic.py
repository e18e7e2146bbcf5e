"""Atomic file writes: a temporary file beside the target, then a rename."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


def atomic_write_text(path, text: str, newline: str | None = None) -> Path:
    """Write ``text`` to ``path`` (parents created) so readers see the old or the new file.

    The temporary name carries the process id, so concurrent writers never share one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8", newline=newline)
    os.replace(tmp, path)
    return path


def atomic_savez(path, **arrays) -> Path:
    """``numpy.savez_compressed`` to ``path`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            np.savez_compressed(handle, **arrays)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    return path
