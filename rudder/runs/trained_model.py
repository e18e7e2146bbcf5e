"""A usable model: :class:`TrainedModel`, the network with its vocabulary, config, experts
and the dataset it is used on, and its text side (token ids, or a frozen text encoder loaded
on first use) that turns free-text queries into the network's text inputs.

It is the one way to get a model: :meth:`TrainedModel.new` builds a fresh one from a config
(the trainer), :meth:`TrainedModel.from_checkpoint` loads a run folder or checkpoint, and
:func:`rudder.hub.published_models.load` a published folder or ``hf://`` Hub id (both
through the checked build of :mod:`rudder.runs.weights`, whose
:func:`~rudder.runs.weights.new_network` is the only call of :func:`rudder.models.build`).
Encoding videos stays with scoring (:mod:`rudder.evaluation.inference`, a layer above).

torch and the model are imported inside the functions that need them, so command lines that
only import this module start fast.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rudder.config import ConfigError, from_dict
from rudder.data.layout import DatasetFolder, ExpertInfo
from rudder.data.lookup import resolve_dataset
from rudder.errors import RunError
from rudder.optional import check_installed, config_needs
from rudder.runs.layout import checkpoint_file, find_checkpoint, run_of_checkpoint

if TYPE_CHECKING:
    import torch

    from rudder.config import DataConfig, TrainConfig
    from rudder.text import Vocabulary


def load_text_side(data: DataConfig, dataset: DatasetFolder, device: str = "cpu"):
    """The frozen text encoder of ``data.text_encoder`` on ``dataset`` (its sentence
    transforms fitted there), or None for a model that reads token ids."""
    if not data.text_encoder:
        return None
    from rudder.text.encoders import load_text_encoder

    return load_text_encoder(data.text_encoder, device, dataset, data.max_words, data)


def token_inputs(vocab: Vocabulary, texts, langs, max_words: int):
    """Token ids and mask of ``texts``, each tokenised in its language as training captions
    are (:func:`rudder.text.tokenize`), at most ``max_words`` tokens."""
    from rudder.text.tokenize import tokenize_batch

    return vocab.batch(tokenize_batch(list(texts), list(langs)), max_len=max_words)


def check_dataset_experts(checkpoint, experts: Mapping[str, ExpertInfo],
                          folder: DatasetFolder) -> None:
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


@dataclass
class TrainedModel:
    """A network with what is needed to query it on ``dataset``.

    ``experts`` are the expert names (sorted); ``run_dir`` and ``checkpoint`` say where it
    was read from (a published folder: the folder and its ``model.safetensors``);
    ``source`` is a Hub model's pinned id ``hf://USER/NAME@<commit>``. The text encoder of
    a run with ``data.text_encoder`` is loaded on ``device`` when first used."""

    model: torch.nn.Module  # built by rudder.runs.weights.new_network
    vocab: Vocabulary
    config: TrainConfig
    dataset: DatasetFolder
    run_dir: Path
    checkpoint: Path
    fingerprint: str
    experts: list[str]
    device: str = "cpu"
    source: str | None = None
    _text_encoder: Any = field(default=None, repr=False)

    # -- constructors -----------------------------------------------------------------------
    @classmethod
    def new(cls, config: TrainConfig, experts: Mapping[str, ExpertInfo], vocab: Vocabulary,
            dataset: DatasetFolder, run_dir: Path, device: str = "cpu", initial_embeddings=None,
            text_encoder=None) -> TrainedModel:
        """A freshly initialised model of ``config`` to be trained into ``run_dir`` (built on
        the CPU: move ``model`` to ``device``; its checkpoint is the run's ``best.pt``, its
        fingerprint empty until one is saved); ``text_encoder``: one already loaded for
        ``config`` on ``dataset`` (:func:`load_text_side`)."""
        from rudder.runs.weights import new_network

        model = new_network(config.model, experts, vocab.table_size, initial_embeddings)
        return cls(model, vocab, config, dataset, Path(run_dir),
                   checkpoint_file(Path(run_dir), "best"), "", sorted(experts), str(device),
                   _text_encoder=text_encoder)

    @classmethod
    def from_checkpoint(cls, path, device: str = "cpu", dataset: str | None = None,
                        ) -> TrainedModel:
        """The model of a run directory or checkpoint file on ``dataset`` (default: the one
        it was trained on), in eval mode on ``device``."""
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
        return cls(model, vocab, config, folder, run_of_checkpoint(checkpoint), checkpoint,
                   state["fingerprint"], sorted(experts), str(device))

    # -- the text side ----------------------------------------------------------------------
    @property
    def reads_tokens(self) -> bool:
        """Whether queries become token ids of the vocabulary (no frozen text encoder)."""
        return not self.config.data.text_encoder

    @property
    def text_encoder(self):
        """The frozen text encoder (loaded on first use, on :attr:`device`, with the
        config's ``data`` as it is then), or None for a model that reads token ids."""
        if self._text_encoder is None and not self.reads_tokens:
            self._text_encoder = load_text_side(self.config.data, self.dataset, self.device)
        return self._text_encoder

    def encode_queries(self, texts, langs) -> tuple[torch.Tensor, torch.Tensor]:
        """The network's text inputs of free-text queries: token ids tokenised per language
        like training, or token features of the frozen text encoder."""
        if self.reads_tokens:
            return token_inputs(self.vocab, texts, langs, self.config.data.max_words)
        encoder = self.text_encoder
        if getattr(encoder, "uses_langs", False):
            return encoder(list(texts), langs=list(langs))
        return encoder(list(texts))
