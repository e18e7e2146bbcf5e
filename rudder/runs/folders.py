"""Run directories, resuming them, and loading a trained run (used by evaluate and the app);
the files inside a run are :mod:`rudder.runs.layout`'s.

torch and the model are imported inside the functions that load a run, so command lines
that only manage run folders (``rudder.train --help``, argument errors) start fast.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from rudder.config import ConfigError, TrainConfig, from_dict, to_dict
from rudder.data.layout import DatasetFolder
from rudder.errors import RunError
from rudder.optional import check_installed, config_needs
from rudder.runs.layout import (
    checkpoint_file,
    checkpoints_under,
    find_checkpoint,
    make_run_dirs,
    run_of_checkpoint,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch

    from rudder.text import Vocabulary


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
        "packages": packages,
        "cuda": torch.version.cuda if torch.cuda.is_available() else None,
        "dataset_fingerprint": dataset_fingerprint,
    }


@dataclass
class LoadedRun:
    """A trained model with what is needed to query it."""

    model: torch.nn.Module  # built by rudder.models.build
    vocab: Vocabulary
    config: TrainConfig
    dataset: DatasetFolder
    run_dir: Path
    checkpoint: Path
    fingerprint: str
    experts: list[str]
    # (texts, langs=...) -> (features, mask); loaded on first use when the run has one
    text_encoder: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None
    source: str | None = None  # a Hub model's pinned id, hf://USER/NAME@<commit>


def resolve_dataset(spec: str) -> DatasetFolder:
    """A dataset folder from ``sample``, a local path or a Hub repo id (downloaded once)."""
    if spec == "sample":
        from rudder.data.sample import sample_dataset_path

        return DatasetFolder(sample_dataset_path())
    path = Path(spec).expanduser()
    if path.exists():
        return DatasetFolder(path)
    if spec.count("/") == 1 and not spec.startswith((".", "/")):
        return DatasetFolder(_download_from_hub(spec))
    raise RunError(f"dataset {spec!r} is neither 'sample', an existing folder nor a Hub repo id")


def _download_from_hub(repo_id: str) -> Path:
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "5")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "10")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, repo_type="dataset"))
    except Exception as error:  # noqa: BLE001 -- offline errors come in many types
        raise RunError(
            f"could not fetch dataset {repo_id!r} from the Hugging Face Hub "
            f"({type(error).__name__}: {error}); with no network, build it locally with "
            "`python -m datasets_scripts build` and pass the folder"
        ) from None


def check_dataset_experts(checkpoint, experts: dict, folder: DatasetFolder) -> None:
    """Refuse a dataset that lacks an expert the run was trained with, or has it with
    another dimension, naming them (the model needs every one)."""
    missing = sorted(e for e in experts if e not in folder.meta.experts)
    if missing:
        raise RunError(
            f"{checkpoint} was trained with experts {sorted(experts)}, but dataset "
            f"{folder.root} lacks {missing} (it has {folder.experts}); evaluate on a dataset "
            "with these experts (e.g. the run's own: drop --dataset)"
        )
    for name, info in experts.items():
        if folder.meta.experts[name].dim != info.dim:
            raise RunError(
                f"{checkpoint}: expert {name!r} has dim {info.dim} in the run but "
                f"{folder.meta.experts[name].dim} in dataset {folder.root}; evaluate on a "
                "dataset built with the same features"
            )


def load_run(path, device="cpu", dataset: str | None = None) -> LoadedRun:
    """Load a run directory, checkpoint, published model folder or ``hf://`` Hub id
    (:mod:`rudder.hub.published_models`) for inference (the model is in eval mode)."""
    from rudder.hub import published_models

    if published_models.is_model_reference(path):
        return load_published(path, device, dataset)
    from rudder.runs.weights import SavedFiles, build_checked, parse_experts, parse_vocabulary
    from rudder.training.checkpoints import load_checkpoint

    checkpoint = find_checkpoint(path)
    state = load_checkpoint(checkpoint, map_location=device)
    missing = [key for key in ("config", "experts", "vocab", "model") if key not in state]
    if missing:
        raise RunError(f"{checkpoint}: not a rudder checkpoint (it lacks {missing})")
    try:
        config = from_dict(state["config"])
    except ConfigError as error:
        raise RunError(f"{checkpoint}: its config is not valid ({error})") from None
    check_installed(config_needs(config))  # e.g. its text encoder's extra, before any work
    experts = parse_experts(state["experts"], f"{checkpoint} (experts)")
    vocab = parse_vocabulary(state["vocab"], f"{checkpoint} (vocab)")
    files = SavedFiles(config=f"{checkpoint} (config)", experts=f"{checkpoint} (experts)",
                       vocabulary=f"{checkpoint} (vocab)", weights=f"{checkpoint} (model)")
    model = build_checked(config, experts, vocab, state["model"], files, device)
    folder = resolve_dataset(dataset or config.data.dataset)
    check_dataset_experts(checkpoint, experts, folder)
    return LoadedRun(
        model=model,
        vocab=vocab,
        config=config,
        dataset=folder,
        run_dir=run_of_checkpoint(checkpoint),
        checkpoint=checkpoint,
        fingerprint=state["fingerprint"],
        experts=sorted(experts),
    )


def load_published(spec, device: str = "cpu", dataset: str | None = None) -> LoadedRun:
    """A :class:`LoadedRun` from a Hub id or a published folder
    (:mod:`rudder.hub.published_models`), on ``dataset`` (default: the one it was trained on),
    refused when the dataset does not fit."""
    from rudder.hub.published_models import WEIGHTS, check_compatible, rebuild, resolve

    resolved = resolve(spec)
    published = rebuild(resolved.path, device)
    trained_on = published.config.data.dataset
    try:
        folder = resolve_dataset(dataset or trained_on)
    except RunError as error:
        if dataset:
            raise
        raise RunError(f"{error}; the model {spec} was trained on {trained_on!r}: pass "
                       "--dataset with a dataset of the same experts and languages") from None
    check_compatible(resolved.source or resolved.path, published.manifest, published.text_side,
                     published.config, folder)
    return LoadedRun(
        model=published.model,
        vocab=published.vocab,
        config=published.config,
        dataset=folder,
        run_dir=resolved.path,
        checkpoint=resolved.path / WEIGHTS,
        fingerprint=str(published.manifest.get("checkpoint", {}).get("fingerprint")),
        experts=sorted(published.manifest["experts"]),
        source=resolved.source,
    )


def encode_queries(run: LoadedRun, texts, langs) -> tuple[torch.Tensor, torch.Tensor]:
    """Model text inputs of free-text queries: token ids tokenised per language like training,
    or token features of the run's frozen text encoder."""
    from rudder.text import tokenize

    if run.config.data.text_encoder:
        if run.text_encoder is None:
            from rudder.text.encoders import load_text_encoder

            run.text_encoder = load_text_encoder(run.config.data.text_encoder, folder=run.dataset,
                                                 max_words=run.config.data.max_words,
                                                 data=run.config.data)
        if getattr(run.text_encoder, "uses_langs", False):
            return run.text_encoder(list(texts), langs=list(langs))
        return run.text_encoder(list(texts))
    token_lists = [tokenize(text, lang) for text, lang in zip(texts, langs, strict=True)]
    return run.vocab.batch(token_lists, max_len=run.config.data.max_words)
