"""Loading a trained model for inference: from a run folder or checkpoint, a published
folder or an ``hf://`` Hub id (:mod:`rudder.hub.published_models`), with the dataset it is
asked on, and turning free-text queries into its text inputs (used by evaluate, the app and
experiments).

torch and the model are imported inside the functions that load a run, so command lines
that only import this module start fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rudder.config import ConfigError, TrainConfig, from_dict
from rudder.data.layout import DatasetFolder
from rudder.data.lookup import resolve_dataset
from rudder.errors import RunError
from rudder.optional import check_installed, config_needs
from rudder.runs.layout import find_checkpoint, run_of_checkpoint

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch

    from rudder.text import Vocabulary


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
    from rudder.runs.checkpoints import load_checkpoint
    from rudder.runs.weights import SavedFiles, build_checked, parse_experts, parse_vocabulary

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
