"""Build a folder beside its target and rename it into place: all or nothing, even when killed.

A staging folder is ``<parent>/.<name>.staging-<pid>-<random>``. :func:`staging` removes it
on any error, on Ctrl-C (SIGINT) and on SIGTERM (turned into ``SystemExit(143)`` while the
block runs), and first removes the staging folders of dead processes (left by ``kill -9``
or a power cut), so an interrupted run never leaves hidden folders behind for long.
:func:`publish` swaps the finished folder in for the target.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

_STAGING = re.compile(r"^\..+\.staging-(\d+)-[^/]+$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def remove_stale(parent) -> list[Path]:
    """Remove the staging folders in ``parent`` whose process no longer runs; returns them."""
    removed = []
    parent = Path(parent)
    if not parent.is_dir():
        return removed
    for path in parent.iterdir():
        match = _STAGING.match(path.name)
        if match and path.is_dir() and not _alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


@contextmanager
def staging(parent, name: str):
    """Yield a fresh staging folder in ``parent`` for ``name``; it is gone when the block ends."""
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    remove_stale(parent)
    stage = Path(tempfile.mkdtemp(prefix=f".{name}.staging-{os.getpid()}-", dir=parent))
    stage.chmod(0o755)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def publish(stage, target) -> None:
    """Put the folder ``stage`` at ``target``, replacing what was there."""
    stage, target = Path(stage), Path(target)
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        os.replace(target, old)
    os.replace(stage, target)
    shutil.rmtree(old, ignore_errors=True)
