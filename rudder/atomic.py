"""Writing files and folders so that readers see the old or the new version, never half of one.

Files: :func:`replacing` yields a temporary sibling to write, then renames it over the target
(:func:`atomic_write_text`, :func:`atomic_savez` and ``rudder.runs.checkpoints`` use it).
Folders: writers stage into a hidden sibling ``.<target>.<tag>-<pid>-<random>`` and rename it
into place on success (:func:`staged_folder`, :func:`swap_into_place`). Three things cover
the ways a writer can die:

- an exception: the writer removes its staging (``DatasetWriter.__exit__``, ``replace_tables``,
  :func:`replacing`, :func:`staged_folder`);
- SIGTERM (``kill``, a scheduler's time limit): :func:`terminate_cleanly` turns it into
  :class:`Terminated` (exit status 143), an exception, so the same cleanup runs; during the
  renames of a swap it is held back until they are done (:func:`held_termination`);
- SIGINT (Ctrl-C): Python raises KeyboardInterrupt, an exception, so the same cleanup runs.
  A process started with SIGINT ignored (``cmd &`` in a script) keeps ignoring it, as its
  parent asked; stop it with SIGTERM. Code that needs Ctrl-C to stop a child (a test) sets
  ``signal.default_int_handler`` in that child rather than inheriting the parent's setting;
- SIGKILL or a power cut: nothing runs, so the next writer of the same target first calls
  :func:`sweep`, which removes the staging of processes that no longer run and restores a
  target that a swap had moved aside (``old``) when the swap did not finish.

Read-modify-write of a dataset folder (``heuristics label``, ``import-relations``,
``video-relations``, ``datasets_scripts translate``) holds :func:`dataset_lock`, so a concurrent
writer's rows are never lost to a rename based on an older read.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from rudder.errors import RudderError

# ---------------------------------------------------------------------------- folders
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
    done: list[str] = []
    if not target.parent.is_dir():
        return done
    aside: list[Path] = []
    others: list[Path] = []
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


@contextmanager
def staged_folder(target) -> Iterator[Path]:
    """A fresh hidden staging folder beside ``target`` (parents created; staging that dead
    writers of ``target`` left is swept first). It is removed when the block ends, also on
    an error, Ctrl-C or SIGTERM; publish its content with :func:`swap_into_place` inside."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep(target)
    stage = staging_path(target, "staging")
    stage.mkdir()
    try:
        with terminate_cleanly():
            yield stage
    finally:
        remove(stage)


# ------------------------------------------------------------------------------ files
@contextmanager
def replacing(path) -> Iterator[Path]:
    """Yield a temporary sibling of ``path`` (parents created) to write; when the block
    succeeds one rename puts it at ``path``, when it fails it is removed.

    The temporary name carries the process id and a random part, so concurrent writers
    never share one, and :func:`sweep` recognises it: each write first sweeps what killed
    writers left beside ``path`` (a killed checkpoint save left a checkpoint-sized file).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep(path)
    tmp = staging_path(path, "tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path, text: str, newline: str | None = None) -> Path:
    """Write ``text`` (UTF-8) to ``path`` so readers see the old or the new file."""
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8", newline=newline)
    return Path(path)


def atomic_savez(path, **arrays) -> Path:
    """``numpy.savez_compressed`` to ``path`` through a temporary file and a rename."""
    with replacing(path) as tmp, open(tmp, "wb") as handle:
        np.savez_compressed(handle, **arrays)
    return Path(path)


# ----------------------------------------------------------------------------- locks
LOCK_NAME = ".rudder.lock"
_held_locks = threading.local()  # the lock files this thread holds


class LockTimeout(RudderError):
    """A dataset folder's lock could not be taken: another process held it for longer than
    the wait allowed, or its file cannot be opened."""


@contextmanager
def dataset_lock(root, timeout: float = 120.0) -> Iterator[Path]:
    """Hold an exclusive lock on the dataset folder ``root`` for the block.

    ``fcntl.flock`` on ``<root>/.rudder.lock`` (hidden, so uploads leave it out; never
    removed, since removing a lock file lets two writers lock different files); the kernel
    releases it when the process exits, also on SIGKILL. Re-entrant within a thread. Waits
    at most ``timeout`` seconds for another holder, then raises :class:`LockTimeout` naming
    the folder.
    """
    path = Path(root) / LOCK_NAME
    key = os.path.realpath(path)
    held = _held_locks.__dict__.setdefault("roots", set())
    if key in held:  # re-entrant within a thread (a writer opening the folder it locked)
        yield path
        return
    deadline = time.monotonic() + timeout
    try:  # read-only: flock needs no write access, so every user who may write the folder
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)  # can lock another's lock file
    except OSError as error:
        raise LockTimeout(f"{path}: cannot open the dataset's lock file ({error.strerror}); "
                          "check the folder's permissions") from None
    with os.fdopen(fd) as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeout(
                        f"{Path(root)}: another process has been writing this dataset for "
                        f"over {timeout:g} s (it holds {path}); wait for it to finish and rerun"
                    ) from None
                time.sleep(0.05)
        held.add(key)
        try:
            yield path
        finally:
            held.discard(key)
            fcntl.flock(handle, fcntl.LOCK_UN)
