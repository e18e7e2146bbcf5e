"""Run directories: naming, creating and resuming them, and the environment a run records;
the files inside a run are :mod:`rudder.runs.layout`'s. Loading a trained run is
:mod:`rudder.evaluation.loading`'s; finding a dataset :mod:`rudder.data.lookup`'s.

torch is imported inside the function that needs it, so command lines that only manage run
folders (``rudder.train --help``, argument errors) start fast.
"""

from __future__ import annotations

import datetime as _dt
import platform
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

from rudder.config import ConfigError, TrainConfig, to_dict
from rudder.errors import RunError
from rudder.runs.layout import (
    checkpoint_file,
    checkpoints_under,
    make_run_dirs,
)


def default_run_dir(name: str, root="runs") -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(root) / f"{stamp}-{name}"


def prepare_run_dir(path: Path, resume: bool, overwrite: bool) -> bool:
    """Create the run directory; an existing non-empty one needs ``resume`` or ``overwrite``.

    Returns whether this call made the directory's content (so :func:`discard_unfinished`
    may remove it again).
    """
    check_run_dir(path, resume, overwrite)
    if resume:
        return False
    if path.exists() and any(path.iterdir()):
        shutil.rmtree(path)
    try:
        make_run_dirs(path)
    except OSError as error:
        raise RunError(f"--output-dir {path}: cannot create it ({error.strerror or error}); "
                       "choose a folder you can write") from None
    return True


def check_run_dir(path: Path, resume: bool, overwrite: bool, marker: Path | None = None) -> None:
    """Refuse what :func:`prepare_run_dir` would refuse, without creating anything; a resume
    needs ``marker`` (default: the run's ``last.pt``)."""
    if resume and overwrite:
        raise RunError("--resume and --overwrite cannot be combined")
    if path.exists() and not path.is_dir():
        raise RunError(f"--output-dir {path} is a file, not a folder; choose another "
                       "--output-dir")
    if resume:
        marker = marker or checkpoint_file(path, "last")
        if not marker.is_file():
            raise RunError(
                f"cannot resume: {marker} does not exist (the run stopped before its first "
                "checkpoint, or this is not a run folder); start it again with --overwrite "
                "instead of --resume"
            )
    elif path.exists() and any(path.iterdir()) and not overwrite:
        raise RunError(
            f"output directory {path} is not empty; pass --resume to continue it or "
            "--overwrite to start again"
        )
    else:
        check_creatable(path)


def check_creatable(path: Path) -> None:
    """Refuse an output folder that cannot be made: its nearest existing ancestor is a file,
    or no folder can be created there (read-only, ``/proc``); tried with an empty probe."""
    from rudder.atomic import staging_path

    path = Path(path).absolute()
    ancestor = path if path.exists() else next(p for p in path.parents if p.exists())
    if not ancestor.is_dir():
        raise RunError(f"--output-dir {path}: {ancestor} is a file, not a folder; choose "
                       "another --output-dir")
    probe = staging_path(ancestor / "rudder-probe", "tmp")
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as error:
        raise RunError(f"--output-dir {path}: cannot create a folder in {ancestor} "
                       f"({error.strerror or error}); choose a folder you can write") from None


def discard_unfinished(path: Path) -> None:
    """Remove a run directory that failed before writing any checkpoint, so a retry with the
    same ``--output-dir`` is not blocked; a run with a checkpoint is kept for ``--resume``."""
    if path.is_dir() and not checkpoints_under(path, "last"):
        shutil.rmtree(path, ignore_errors=True)


# Keys a resumed run may change and record in its saved config: they do not alter what was
# trained so far. Any other change is refused: the saved config is the truth.
RESUMABLE_KEYS = ("epochs", "patience", "device", "cpu_threads", "tensorboard",
                  "data.eval_batch_size")


def check_resume_changes(run_dir: Path, saved: dict, config: TrainConfig) -> None:
    """Refuse a resume of ``run_dir`` whose ``config`` differs from its ``saved`` config
    other than in :data:`RESUMABLE_KEYS`."""
    before, after = _flatten(saved), _flatten(to_dict(config))
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    refused = [k for k in changed if k not in RESUMABLE_KEYS]
    if refused:
        listed = ", ".join(f"{k}={after.get(k)!r} (run: {before.get(k)!r})" for k in refused)
        raise ConfigError(
            f"cannot resume {run_dir} with {listed}: a resumed run keeps its saved config except "
            f"{list(RESUMABLE_KEYS)}; start a new run in another --output-dir"
        )
    if "epochs" in changed and config.optim.scheduler == "cosine":
        raise ConfigError(
            f"cannot resume {run_dir} with epochs={config.epochs}: optim.scheduler=cosine anneals "
            f"over the {before['epochs']} epochs the run started with; start a new run"
        )


def _flatten(data: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``, else :func:`platform.processor`, else the
    architecture)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment_record(dataset_fingerprint: str) -> dict:
    """What ``env.json`` holds: code version, packages, machine and data fingerprint."""
    import torch

    packages: dict[str, str | None] = {}
    for name in ("rudder", "torch", "numpy", "scipy", "scikit-learn", "pyarrow", "datasets",
                 "stanza"):
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = None
    return {
        "git_sha": _git_sha(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "packages": packages,
        "cuda": torch.version.cuda if torch.cuda.is_available() else None,
        "dataset_fingerprint": dataset_fingerprint,
    }
