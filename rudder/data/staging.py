"""Staging beside a target, so a killed build or rewrite leaves nothing half-written behind.

Writers stage into a hidden sibling ``.<target>.<tag>-<pid>-<random>`` and rename it into
place on success (:func:`swap_into_place`). Three things cover the ways a writer can die:

- an exception: the writer removes its staging (``DatasetWriter.__exit__``, ``replace_tables``);
- SIGTERM (``kill``, a scheduler's time limit): :func:`terminate_cleanly` turns it into
  :class:`Terminated` (exit status 143), an exception, so the same cleanup runs; during the
  renames of a swap it is held back until they are done (:func:`held_termination`);
- SIGKILL or a power cut: nothing runs, so the next writer of the same target first calls
  :func:`sweep`, which removes the staging of processes that no longer run and restores a
  target that a swap had moved aside (``old``) when the swap did not finish.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import threading
from contextlib import contextmanager
from pathlib import Path

STAGED = re.compile(r"^\.(?P<target>.+)\.(?P<tag>staging|old|tmp)-(?P<pid>\d+)-[0-9a-f]{8}$")
_held = {"depth": 0, "pending": False}


class Terminated(SystemExit):
    """SIGTERM arrived while a write was staged; the staging has been removed."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(128 + signum)


def staging_path(target, tag: str) -> Path:
    """A fresh hidden sibling name of ``target`` (``tag``: staging, old or tmp)."""
    target = Path(target)
    return target.with_name(f".{target.name}.{tag}-{os.getpid()}-{secrets.token_hex(4)}")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove(path: Path) -> None:
    """Remove a staged file or folder, whichever it is."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def sweep(target) -> list[str]:
    """Clean the staging that dead processes left beside ``target``; returns what was done.

    A moved-aside ``old`` copy is renamed back when ``target`` is missing (the process died
    between the two renames of a swap); every other stale sibling is removed. Staging of
    running processes (checked by process id on this machine) is left alone.
    """
    target = Path(target)
    done = []
    if not target.parent.is_dir():
        return done
    aside, others = [], []
    for path in sorted(target.parent.iterdir()):
        match = STAGED.match(path.name)
        if match and match["target"] == target.name and not _alive(int(match["pid"])):
            (aside if match["tag"] == "old" else others).append(path)
    for path in aside + others:  # a restore of the old copy comes before any removal
        if path in aside and not target.exists():
            os.replace(path, target)
            done.append(f"restored {target} from {path.name}, left by a killed swap")
        else:
            remove(path)
            done.append(f"removed {path.name}, left by a killed writer")
    return done


@contextmanager
def held_termination():
    """Hold SIGTERM back (under :func:`terminate_cleanly`) until the block is done."""
    _held["depth"] += 1
    try:
        yield
    finally:
        _held["depth"] -= 1
        if not _held["depth"] and _held["pending"]:
            _held["pending"] = False
            raise Terminated()


@contextmanager
def terminate_cleanly():
    """Within the block SIGTERM raises :class:`Terminated`, so ``finally``/``__exit__`` run.

    Signal handlers belong to the main thread; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        if _held["depth"]:
            _held["pending"] = True
            return
        raise Terminated(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def swap_into_place(staged: Path, target: Path) -> None:
    """Rename ``staged`` to ``target``; an existing target is moved aside, then removed
    (or put back when the second rename fails)."""
    old, swapped = None, False
    try:
        with held_termination():
            if target.exists():
                old = staging_path(target, "old")
                os.replace(target, old)
            os.replace(staged, target)
            swapped = True
    finally:
        if old is not None and swapped:
            remove(old)
        elif old is not None:
            os.replace(old, target)
