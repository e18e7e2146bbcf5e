"""Validation of a whole run config, before anything runs: :func:`from_dict` (types, the
fields' rules, then the checks that span fields: the text side and the loss) and
:func:`check_new_run` (settings only a new run refuses)."""

from __future__ import annotations

from dataclasses import dataclass

from rudder.config.coerce import build, check_rule
from rudder.config.fields import value_at
from rudder.config.schema import RULES, DataConfig, TrainConfig
from rudder.errors import ConfigError
from rudder.languages import check_languages


def from_dict(data: dict) -> TrainConfig:
    """Build and validate a :class:`TrainConfig` from a nested dict: the type of every field
    (from the dataclass annotations), then every field's rule (:data:`RULES`, defaults
    included), the text side and the loss. Every failure is a :class:`ConfigError` naming
    the key and its valid values."""
    config = build(TrainConfig, data or {})
    for key, rule in RULES.items():
        check_rule(key, value_at(config, key), rule)
    _check_text_side(config.data)
    _check_loss(config)
    return config


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


@dataclass
class _FactsBeforeData:
    """:class:`rudder.losses.RunFacts` of a config checked before its data are read."""

    embedding_dim: int

    def caption_similarity_threshold(self, top_fraction: float,
                                     other_videos: bool = False) -> None:
        return None


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
    if sup.relations_file and not sup.manual_relations:
        raise ConfigError("supervision.relations_file needs supervision.manual_relations: true "
                          "(the file replaces the dataset's relations, which only PO(M) reads)")
    changed = [f"supervision.{key}" for key, default in (("relation_pinning", "both"),
                                                          ("relation_share", 1.0))
               if getattr(sup, key) != default]
    if changed and not sup.relation_batches:
        raise ConfigError(f"{' and '.join(changed)} shape the relation batches: they need "
                          "supervision.relation_batches: true")
    if sup.relation_batches:
        needs = {"supervision.manual_relations": (sup.manual_relations, True),
                 "data.caption_sampling": (config.data.caption_sampling, "random"),
                 "supervision.positive_sampling": (sup.positive_sampling, "own")}
        wrong = [f"{key}={want!r} (got {got!r})" for key, (got, want) in needs.items()
                 if got != want]
        if wrong:
            raise ConfigError(f"supervision.relation_batches needs {', '.join(wrong)}")


def _check_text_side(data: DataConfig) -> None:
    """Word vectors name languages (or ``all``) and exclude a text encoder; the sentence
    transforms need a sentence encoder; n-gram sizes are ordered."""
    if data.word_vectors is not None:
        check_languages([k for k in data.word_vectors if k != "all"], where="data.word_vectors")
        if data.text_encoder:
            raise ConfigError("data.word_vectors and data.text_encoder exclude each other: "
                              "word vectors initialise trainable embeddings, an encoder "
                              "replaces them")
    if data.sentence_fit_langs is not None:
        check_languages(data.sentence_fit_langs, where="data.sentence_fit_langs")
    if data.sentence_pivot_langs is not None:
        check_languages(data.sentence_pivot_langs, where="data.sentence_pivot_langs")
    if data.sentence_fit_text is not None:
        from rudder.languages import SUPPORTED
        from rudder.text.encoders import XLMR_LANGUAGES

        unknown = sorted(set(data.sentence_fit_text) - set(SUPPORTED) - XLMR_LANGUAGES)
        if unknown:
            raise ConfigError(f"data.sentence_fit_text: unknown language code(s) {unknown}; "
                              "use ISO 639-1 codes (e.g. bn, kn)")
    if (data.sentence_centering or data.sentence_whitening or data.sentence_pivots
            or data.sentence_alignment or data.sentence_language_removal
            or data.sentence_pivot_nullspace or data.sentence_pivot_passages
            or data.sentence_input_nullspace):
        from rudder.text.encoders import encoder_kind

        if encoder_kind(data.text_encoder) != "sentence":
            raise ConfigError("data.sentence_centering, _whitening, _pivots, _alignment, "
                              "_language_removal, _pivot_nullspace, _input_nullspace "
                              "and _pivot_passages need a "
                              "sentence encoder (data.text_encoder: multilingual-e5 or "
                              f"sentence:FOLDER), got data.text_encoder={data.text_encoder!r}")
    for key, off in (("sentence_pivot_nullspace", "0"), ("sentence_pivot_passages", "false")):
        if getattr(data, key) and not data.sentence_pivots:
            raise ConfigError(f"data.{key}={getattr(data, key)} changes only the pivot "
                              "search, and data.sentence_pivots is 0: set "
                              f"data.sentence_pivots (e.g. 5) or data.{key}={off}")
    if data.subword_min_n > data.subword_max_n:
        raise ConfigError(f"data.subword_min_n={data.subword_min_n} is larger than "
                          f"data.subword_max_n={data.subword_max_n}")
