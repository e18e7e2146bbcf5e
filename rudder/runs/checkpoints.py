"""Checkpoint files: written atomically, read with ``torch.load(weights_only=True)``.

Checkpoints (and the app's index cache) hold only tensors and plain values: dicts, lists,
numbers, strings, None. :func:`read_plain` refuses any file that asks to build another
object (a crafted pickle that would run code) before anything in it runs, and reports a
truncated or corrupt file; every reader of a ``.pt`` file in rudder goes through it.
:func:`restore_scaler` and :func:`restore_generator` put saved training state back when a
run resumes, also on another device type.
"""

from __future__ import annotations

import logging
import os
import pickle
import re
from pathlib import Path

import torch

from rudder.atomic import replacing
from rudder.errors import RudderError, RunError

log = logging.getLogger(__name__)

# 2: plain values only, read with weights_only=True (1 pickled arbitrary objects).
CHECKPOINT_VERSION = 2


def atomic_torch_save(obj, path: Path) -> None:
    """``torch.save`` through a temporary file and a rename (readers never see half a file)."""
    with replacing(path) as tmp:
        torch.save(obj, tmp)


def link_or_copy(source: Path, target: Path) -> None:
    """Make ``target`` hold ``source``'s bytes atomically: a hard link (no copy; a later
    ``os.replace`` of ``source`` gives it a new inode, so ``target`` keeps these bytes), or
    a copy where the file system has no hard links."""
    import shutil

    with replacing(target) as tmp:
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)


def read_plain(path, map_location="cpu", error: type[RudderError] = RunError):
    """The content of a ``torch.save`` file of tensors and plain values, or ``error`` naming
    the file when it holds anything else or cannot be read."""
    path = Path(path)
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except OSError as failure:
        raise error(f"{path}: cannot be read ({failure.strerror or failure})") from None
    except Exception as failure:  # noqa: BLE001 -- a damaged zip or pickle fails in many ways
        found = _refused_global(failure)
        if found:
            raise error(
                f"{path}: holds objects that are not tensors or plain values: refused for "
                f"safety (it asks to build {found}); rudder never writes such files, so it was "
                "made elsewhere or tampered with"
            ) from None
        raise error(
            f"{path}: cannot be read, it is truncated or corrupt ({_reason(failure)})"
        ) from None


# How torch's weights-only unpickler names a refused global: "Unsupported global: GLOBAL
# m.f was not an allowed global" (torch 2.4-2.12, and 2.13 for classes) and "unsupported
# GLOBAL m.f whose module m is blocked" (torch 2.13 for functions of blocked modules).
_REFUSED = re.compile(r"(?:Unsupported global: GLOBAL|unsupported GLOBAL) ([\w.<>]+)",
                      re.IGNORECASE)


def _refused_global(failure: Exception) -> str | None:
    """The global a weights-only load refused (``module.name``), or None for other errors."""
    if not isinstance(failure, pickle.UnpicklingError):
        return None
    found = _REFUSED.search(str(failure))
    return found.group(1) if found else None


def _reason(failure: Exception) -> str:
    """The informative part of a torch.load error, short and on one line."""
    text = str(failure)
    detail = re.search(r"WeightsUnpickler error:\s*(.*?)(?:\n\n|$)", text, re.DOTALL)
    first_sentence = (detail.group(1) if detail else text).split(". ")[0]
    return f"{type(failure).__name__}: {' '.join(first_sentence.split())[:120]}".rstrip(": ")


def load_checkpoint(path, map_location="cpu") -> dict:
    """A checkpoint of this rudder version (see :func:`read_plain`), else a :class:`RunError`."""
    state = read_plain(path, map_location)
    version = state.get("version") if isinstance(state, dict) else None
    if version != CHECKPOINT_VERSION:
        raise RunError(
            f"{path}: checkpoint version {version} is not supported (this rudder reads version "
            f"{CHECKPOINT_VERSION}); train the run again"
        )
    return state


def restore_scaler(scaler: torch.amp.GradScaler, saved: dict) -> None:
    """Load a GradScaler's saved state, unless the run changed device between its AMP and
    no-AMP sides (``device`` may change on resume): a disabled scaler saved ``{}``, and an
    enabled one then starts from its initial scale."""
    if saved or not scaler.is_enabled():
        scaler.load_state_dict(saved)
    else:
        log.warning("resumed with mixed precision after a run without it: the loss scale "
                    "starts from its initial value")


def restore_generator(generator: torch.Generator, saved: torch.Tensor, seed: int) -> None:
    """Set a generator's saved state; a state of another device type (a CUDA generator's
    seed and offset vs the CPU's Mersenne Twister) cannot be carried over, so the generator
    restarts from ``seed`` and the resumed run is no longer bit-identical to an
    uninterrupted one (said in the log)."""
    try:
        generator.set_state(saved)
    except RuntimeError:
        generator.manual_seed(seed)
        log.warning("resumed on another device type: the loss's random draws restart from "
                    "seed %d, so this run will differ from one that was never interrupted", seed)
