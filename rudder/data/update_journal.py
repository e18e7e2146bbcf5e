"""All-or-nothing updates of several files of a dataset folder, through a redo journal.

A rewrite of several files (``heuristics label`` replaces every caption split,
``translate`` the captions, ``rudder.json`` and the card) cannot rename them all at once, and a
kill between two renames would leave some splits new and some old. So an update:

1. writes every new file under a hidden staging folder inside the dataset,
   ``<root>/.rudder.update-<pid>-<random>/<relative path>`` (same file system, so renames);
2. commits by writing the journal ``<root>/.rudder.update.json`` (one atomic rename) naming
   the staging folder, the files and the card configs to add;
3. applies it: renames each staged file to its place, adds the configs, refreshes the card's
   data digests (:func:`rudder.data.card.refresh_digests`), removes the journal, then the
   staging folder.

Before the commit nothing of the dataset has changed (a killed writer's staging folder is
removed by the next reader or writer that finds the dataset lock free); after it, step 3 is
redone from the start by whoever opens the folder next (:func:`complete_pending`, called by every
:class:`rudder.data.layout.DatasetFolder` and by the next writer). Redoing it is harmless:
a file already renamed is no longer staged.
Both hold :func:`rudder.atomic.dataset_lock`, so a reader waits for a live writer's renames.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from rudder.atomic import (
    LockTimeout,
    atomic_write_text,
    dataset_lock,
    held_termination,
    terminate_cleanly,
)
from rudder.data.card import ensure_config, refresh_digests
from rudder.errors import RudderError

JOURNAL = ".rudder.update.json"
_STAGE = re.compile(r"^\.rudder\.update-(?P<pid>\d+)-[0-9a-f]{8}$")


class UpdateError(RudderError):
    """An interrupted update that this process cannot complete (e.g. no write access)."""


def _stage_folder(root: Path) -> Path:
    import secrets

    return root / f".rudder.update-{os.getpid()}-{secrets.token_hex(4)}"


def _apply(root: Path, journal: dict) -> None:
    """Step 3: rename the staged files into place, add configs, refresh digests, clean up."""
    stage = root / journal["stage"]
    for relative in journal["files"]:
        staged = stage / relative
        if staged.exists():
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged, root / relative)
    for name, data_files in journal.get("configs", {}).items():
        ensure_config(root, name, data_files)
    for folder in journal.get("digests", []):
        refresh_digests(root, folder)
    (root / JOURNAL).unlink(missing_ok=True)
    shutil.rmtree(stage, ignore_errors=True)


def _read_journal(root: Path) -> dict:
    path = root / JOURNAL
    try:
        journal = json.loads(path.read_text(encoding="utf-8"))
        if not _STAGE.match(journal["stage"]) or not all(
            isinstance(f, str) and ".." not in Path(f).parts and not Path(f).is_absolute()
            for f in journal["files"]
        ):
            raise ValueError("unexpected staging folder or file path")
        return journal
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UpdateError(
            f"{path}: the journal of an interrupted update is unreadable ({error}); the dataset "
            "may hold a mix of old and new files: rebuild it, or restore it from a copy"
        ) from None


def _remove_dead_stages(root: Path) -> None:
    """Remove the staging folders of writers that died before their commit. Call it holding the
    dataset lock: every writer stages under that lock, so a staging folder another process left
    is dead, whichever machine wrote it (a process id says nothing across the hosts of shared
    storage). This process's own folders are left to the update that made them."""
    own = f".rudder.update-{os.getpid()}-"
    for path in root.glob(".rudder.update-*"):
        if _STAGE.match(path.name) and not path.name.startswith(own):
            shutil.rmtree(path, ignore_errors=True)


def complete_pending(root) -> bool:
    """Finish an update that a killed writer committed but did not apply; True if there was
    one. Without one, the staging of writers killed before their commit is removed, when no
    writer holds the dataset lock (and where this user may)."""
    root = Path(root)
    if not (root / JOURNAL).exists():
        if any(root.glob(".rudder.update-*")):
            try:  # only when no writer holds the lock: a live writer's staging is in use
                with dataset_lock(root, timeout=0):
                    _remove_dead_stages(root)
            except LockTimeout:  # a writer at work, or a folder this user may not lock
                pass
        return False
    try:
        with dataset_lock(root):
            if not (root / JOURNAL).exists():  # the writer finished while we waited
                return False
            with held_termination():
                _apply(root, _read_journal(root))
    except (LockTimeout, PermissionError) as error:
        raise UpdateError(
            f"{root}: an update of this dataset was interrupted ({JOURNAL} is there) and "
            f"cannot be completed here ({error}); open the folder once as a user who may "
            "write it (any rudder command does it), then retry"
        ) from None
    return True


def update_files(root, writers: dict, configs: dict | None = None,
                 digests: tuple[str, ...] = ()) -> None:
    """Replace the files ``writers`` names (``{relative path: write(path)}``) all or nothing.

    ``configs`` (``{config name: data_files}``) are added to the card if missing and the data
    digests of the configs under each folder of ``digests`` refreshed, as part of the same
    update. A failure or SIGTERM before the commit leaves the dataset unchanged; a kill after
    it is completed by the next reader or writer (module docstring).
    """
    root = Path(root)
    with dataset_lock(root), terminate_cleanly():
        complete_pending(root)
        _remove_dead_stages(root)
        stage = _stage_folder(root)
        try:
            for relative, write in writers.items():
                target = stage / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                write(target)
                _fsync(target)
            journal = {"stage": stage.name, "files": list(writers), "configs": configs or {},
                       "digests": list(digests)}
            with held_termination():
                atomic_write_text(root / JOURNAL, json.dumps(journal, ensure_ascii=False))
                _apply(root, journal)
        finally:
            if not (root / JOURNAL).exists():
                shutil.rmtree(stage, ignore_errors=True)


def _fsync(path: Path) -> None:
    """Flush a staged file to disk before the commit names it (a power cut after the commit
    must not leave an empty file to rename)."""
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())
