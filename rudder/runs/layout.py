"""The files of a run directory: their paths, and the readers and writers the parts share.

Every other module reaches a run's files through this one (``tests/runs/test_run_layout.py``
checks that no other source names them). A run directory (``python -m rudder.train``)::

    config.yaml              the resolved config          write_config / read_config
    env.json                 code version, packages, dataset fingerprint
    train.log                the training log
    metrics.jsonl            one line per validation      append_history / read_history
    metrics.json             test metrics of best.pt      write_metrics / read_metrics
    predictions/<split>.npz  similarities and ranks       read_predictions (written by
                                                          rudder.evaluation.predictions)
    checkpoints/last.pt, checkpoints/best.pt
    evaluations/<split>-<name>/   ``rudder.evaluate``'s metrics.json and predictions.npz

A ``--seeds`` group holds ``config.yaml``, ``metrics.json`` (mean ± std over seeds) and one run
per ``seed-<s>``; a rank-fusion result of ``experiments`` holds ``metrics.json`` and
``predictions/test.npz`` like a run.
"""

from __future__ import annotations

import json
import logging
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rudder.atomic import atomic_write_text
from rudder.config import dump_yaml, load_yaml, to_dict
from rudder.errors import RunError

if TYPE_CHECKING:
    from rudder.config import TrainConfig

log = logging.getLogger("rudder.train")

CHECKPOINTS = "checkpoints"
PREDICTIONS = "predictions"
METRICS = "metrics.json"
HISTORY = "metrics.jsonl"


# -- paths -------------------------------------------------------------------------------------
def config_file(run_dir) -> Path:
    return Path(run_dir) / "config.yaml"


def env_file(run_dir) -> Path:
    return Path(run_dir) / "env.json"


def log_file(run_dir) -> Path:
    return Path(run_dir) / "train.log"


def history_file(run_dir) -> Path:
    """``metrics.jsonl``: one JSON line per validation evaluation."""
    return Path(run_dir) / HISTORY


def metrics_file(result_dir) -> Path:
    """``metrics.json`` of a run, a seeds group, an evaluation or a fusion."""
    return Path(result_dir) / METRICS


def folders_with_results(root) -> set[Path]:
    """Folders under ``root`` (any depth) holding test metrics or a validation history."""
    return {path.parent for name in (METRICS, HISTORY) for path in Path(root).rglob(name)}


def checkpoint_file(run_dir, name: str = "best") -> Path:
    """``checkpoints/<name>.pt`` (``last`` or ``best``)."""
    return Path(run_dir) / CHECKPOINTS / f"{name}.pt"


def predictions_file(run_dir, split: str = "test") -> Path:
    """A run's (or fusion's) ``predictions/<split>.npz``."""
    return Path(run_dir) / PREDICTIONS / f"{split}.npz"


def evaluation_dir(run_dir, split: str, name: str) -> Path:
    """``evaluations/<split>-<name>/``: where ``rudder.evaluate`` writes by default."""
    return Path(run_dir) / "evaluations" / f"{split}-{name}"


def evaluation_predictions_file(out_dir) -> Path:
    """The predictions of a ``rudder.evaluate`` output folder."""
    return Path(out_dir) / "predictions.npz"


def make_run_dirs(run_dir) -> None:
    """The sub-folders a new run writes into."""
    (Path(run_dir) / CHECKPOINTS).mkdir(parents=True, exist_ok=True)
    (Path(run_dir) / PREDICTIONS).mkdir(exist_ok=True)


def is_single_run(path) -> bool:
    """Whether ``path`` is one run (it has a checkpoints folder), not a ``--seeds`` group."""
    return (Path(path) / CHECKPOINTS).is_dir()


def run_of_checkpoint(checkpoint) -> Path:
    """The run directory that holds ``checkpoints/<name>.pt``."""
    return Path(checkpoint).parent.parent


def checkpoints_under(root, name: str = "best") -> list[Path]:
    """Every ``checkpoints/<name>.pt`` under ``root`` at any depth (``root`` itself included),
    except inside hidden folders: a run being written in a staging folder
    (``rudder.atomic.staged_folder``) is no run yet."""
    root = Path(root)
    return [path for path in root.glob(f"**/{CHECKPOINTS}/{name}.pt")
            if not any(part.startswith(".") for part in path.relative_to(root).parts)]


def find_checkpoint(path) -> Path:
    """``best.pt`` (else ``last.pt``) of a run directory, or the checkpoint file itself."""
    path = Path(path)
    if path.is_file():
        return path
    for name in ("best", "last"):
        if checkpoint_file(path, name).is_file():
            return checkpoint_file(path, name)
    raise RunError(
        f"{path} holds no checkpoint (expected {checkpoint_file(path)} in a run directory)"
    )


# -- JSON, config and history --------------------------------------------------------------------
def read_json(path) -> dict:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise RunError(f"{path}: cannot read ({error})") from None


def write_json(path, data: dict) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=2))


def read_metrics(result_dir) -> dict:
    return read_json(metrics_file(result_dir))


def write_metrics(result_dir, summary: dict) -> Path:
    return write_json(metrics_file(result_dir), summary)


def write_config(run_dir, config: TrainConfig) -> None:
    atomic_write_text(config_file(run_dir), dump_yaml(to_dict(config)))


def read_config(run_dir) -> dict:
    """The run's ``config.yaml`` as a dict; a missing or invalid file is a ConfigError naming it."""
    return load_yaml(config_file(run_dir))


def append_history(run_dir, record: dict) -> None:
    with open(history_file(run_dir), "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def _history_lines(path: Path) -> list[tuple[str, dict]]:
    """``(line, record)`` of every evaluation line. A torn last line (a run stopped, or still
    writing, in the middle of it) is left out; any other line that is not an evaluation record
    is an error naming it."""
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            record["epoch"]
        except (json.JSONDecodeError, TypeError, KeyError):
            if number == len(lines) and not text.endswith("\n"):
                log.warning(
                    "%s: leaving out the torn last line (its run stopped while writing it)", path
                )
                continue
            raise RunError(
                f"{path}:{number}: not an evaluation record ({line[:60]!r}); "
                "delete the line and resume again"
            ) from None
        records.append((line, record))
    return records


def read_history(run_dir) -> list[dict]:
    """The validation evaluations of ``metrics.jsonl``, in order (none when it is missing)."""
    return [record for _, record in _history_lines(history_file(run_dir))]


def truncate_history(run_dir, last_epoch: int) -> None:
    """Drop evaluation lines after ``last_epoch`` (and a torn last line) so a resumed run
    writes no duplicates."""
    path = history_file(run_dir)
    if path.is_file():
        kept = [line for line, record in _history_lines(path) if record["epoch"] <= last_epoch]
        atomic_write_text(path, "".join(line + "\n" for line in kept))


# -- predictions ---------------------------------------------------------------------------------
@dataclass
class Predictions:
    """A model's scores on a split and the per-query ranks they give (video-major rows,
    docs/architecture.md). ``sims_v2t`` scores the video-to-text direction where it differs from
    ``sims`` (rank fusion ranks each direction separately), else it is None."""

    sims: np.ndarray  # (V*K, V) captions x videos
    query_masks: np.ndarray  # (V, K) valid caption slots
    caption_ids: np.ndarray  # (V, K) str
    video_ids: np.ndarray  # (V,) str
    ranks_t2v: np.ndarray  # (V*K,) 0-based, tie-averaged, NaN on masked slots
    ranks_v2t: np.ndarray  # (V,)
    sims_v2t: np.ndarray | None = None


REQUIRED_ARRAYS = ("sims", "query_masks", "caption_ids", "video_ids", "ranks_t2v", "ranks_v2t")


def read_predictions(path) -> Predictions:
    """Predictions saved by :func:`rudder.evaluation.predictions.write_predictions` (or by
    rudder before it, which wrote the
    same arrays); a missing file or array is a RunError naming it."""
    path = Path(path)
    try:
        with np.load(path) as saved:
            arrays = {name: saved[name] for name in saved.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise RunError(f"{path}: cannot read predictions ({error})") from None
    missing = [name for name in REQUIRED_ARRAYS if name not in arrays]
    if missing:
        raise RunError(
            f"{path}: predictions without {missing}; evaluate the run again to rewrite them"
        )
    return Predictions(
        **{name: arrays[name] for name in (*REQUIRED_ARRAYS, "sims_v2t") if name in arrays}
    )
