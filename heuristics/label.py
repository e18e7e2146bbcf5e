"""``python -m heuristics label``: add noun/verb/class columns to a dataset's captions.

Each caption is tagged (a Stanza or lexicon tagger, through the tag cache), its nouns and
verbs extracted (:mod:`heuristics.nouns_verbs`) and mapped to concept ids
(:mod:`heuristics.classes`). The new ``captions`` tables replace the old ones with
:func:`rudder.data.layout_writer.replace_tables` (all splits or none), so a failed run leaves the
dataset unchanged. The replacement holds the dataset's lock (:func:`rudder.atomic.dataset_lock`)
and is refused when another writer changed the captions since they were read, so concurrent
runs never lose each other's columns. The statistics one tunes alpha on come from
:func:`rudder.supervision.partial_labels` over the class sets: for each query caption of a
split, the number of *other* captions of the split that are positive, partial or
negative for it, and the distribution of those shares over the queries. ``langs`` restricts
labelling (and the statistics) to some languages; captions of the others keep what they had
(nothing, when the columns are new). :func:`sample_pairs` draws labelled pairs for a reader
to judge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rudder.atomic import dataset_lock
from rudder.data.layout import NOUN_VERB_COLUMNS, SPLITS, DatasetFolder
from rudder.data.layout_writer import files_state, replace_tables
from rudder.labels import HEURISTIC_LABELS, NO_LABEL, PairLabel
from rudder.languages import check_language

from .class_rules import ClassRules, extract_classes, lemma_vocabulary
from .classes import ClassMap
from .nouns_verbs import ExtractionOptions
from .stop_nouns import counted_nouns, default_stop_nouns
from .taggers import TaggerError, check_texts, tag_texts

LABEL_NAMES = tuple(label.text for label in HEURISTIC_LABELS)  # the pair labels counted


class LabelError(ValueError):
    """A dataset that cannot be labelled as asked."""


@dataclass
class LabelConfig:
    """What ``label`` does besides tagging (see :func:`label_dataset`)."""

    alpha_n: float = 0.5
    alpha_v: float = 0.5
    options: ExtractionOptions = field(default_factory=ExtractionOptions)
    stats_queries: int = 5000
    num_proc: int = 1
    stop_nouns: dict = field(default_factory=default_stop_nouns)  # lang -> lemmas
    rules: ClassRules = field(default_factory=ClassRules)
    sample_pairs: int = 0  # labelled pairs per split to print (see sample_pairs)
    seed: int = 0
    langs: tuple[str, ...] | None = None  # None: every language of the dataset


def caption_tables(folder: DatasetFolder) -> dict[str, pa.Table]:
    """Every caption split; a split file the card lists but that is missing is an error (a
    deleted file would otherwise leave that split unlabelled, silently)."""
    missing = folder.missing_splits("captions")
    if missing:
        raise LabelError(
            f"{missing[0]} is missing, but the dataset's card lists it: the file was deleted "
            "or not copied; restore it (or rebuild the dataset), then rerun"
        )
    tables = {}
    for split in SPLITS:
        if (folder.root / "captions" / f"{split}.parquet").is_file():
            tables[split] = folder.captions(split)
    if not tables:
        raise LabelError(f"{folder.root}: no captions to label")
    return tables


def _check(split: str, table: pa.Table, only=None) -> None:
    ids = table.column("caption_id").to_pylist()
    langs = table.column("lang").to_pylist()
    texts = table.column("text").to_pylist()
    for i, lang in enumerate(langs):
        check_language(lang, f"captions/{split}.parquet, caption {ids[i]!r}")
    for lang in sorted(set(langs) & set(only or langs)):
        rows = [i for i, code in enumerate(langs) if code == lang]
        try:
            check_texts(
                [texts[i] for i in rows],
                lang,
                names=[f"{ids[i]!r} in captions/{split}.parquet" for i in rows],
            )
        except TaggerError as error:
            raise LabelError(str(error)) from None


def _check_models(tagger, langs) -> None:
    """Refuse before any tagging when the tagger has no model for one of ``langs``."""
    missing, errors = [], []
    for lang in langs:
        try:
            tagger.model_id(lang)
        except TaggerError as error:
            missing.append(lang)
            errors.append(str(error))
    if missing:
        have = [lang for lang in langs if lang not in missing]
        hint = f", or label only --langs {' '.join(have)}" if have else ""
        raise LabelError(
            f"no tagger model for {', '.join(missing)}, so nothing was tagged{hint}: "
            + "; ".join(errors)
        )


def annotate(
    table: pa.Table,
    tagger,
    class_map: ClassMap,
    options: ExtractionOptions,
    cache=None,
    num_proc: int = 1,
    stop_nouns=None,
    rules: ClassRules | None = None,
    only=None,
) -> pa.Table:
    """``table`` with ``nouns``, ``verbs``, ``noun_classes``, ``verb_classes`` (re)placed for the
    captions in the languages ``only`` (default all); other captions keep their values. The
    class-map ``rules`` apply, and ``stop_nouns`` are left out of ``noun_classes``."""
    langs = table.column("lang").to_pylist()
    texts = table.column("text").to_pylist()
    columns: dict[str, list[Any]] = {
        name: table.column(name).to_pylist() if name in table.column_names else [None] * len(texts)
        for name in NOUN_VERB_COLUMNS
    }
    for lang in sorted(set(langs) & set(only or langs)):
        rows = [i for i, code in enumerate(langs) if code == lang]
        tagged = tag_texts(tagger, [texts[i] for i in rows], lang, cache=cache, num_proc=num_proc)
        vocabulary = lemma_vocabulary(tagger, tagged, lang)
        for i, words in zip(rows, tagged, strict=False):
            nouns, verbs, _, verb_classes = extract_classes(
                words, lang, class_map, options, rules or ClassRules(), vocabulary
            )
            columns["nouns"][i], columns["verbs"][i] = nouns, verbs
            counted = counted_nouns(nouns, lang, stop_nouns or {})
            columns["noun_classes"][i] = class_map.classes("noun", lang, counted)
            columns["verb_classes"][i] = verb_classes
    keep = [name for name in table.column_names if name not in NOUN_VERB_COLUMNS]
    out = table.select(keep)
    for name in NOUN_VERB_COLUMNS:
        out = out.append_column(name, pa.array(columns[name], pa.list_(pa.string())))
    return out


def _sparse(class_lists):
    from scipy import sparse

    ids = {c: k for k, c in enumerate(sorted({c for row in class_lists for c in row}))}
    rows = np.repeat(np.arange(len(class_lists)), [len(set(r)) for r in class_lists])
    cols = np.array([ids[c] for row in class_lists for c in dict.fromkeys(row)], dtype=np.int64)
    return sparse.csr_matrix(
        (np.ones(len(cols), np.float32), (rows, cols)), shape=(len(class_lists), max(len(ids), 1))
    )


def _label_rows(nouns, verbs, queries, alpha_n: float, alpha_v: float):
    """``(len(queries), n)`` pair labels of the queries against every caption, self-pairs
    ``NO_LABEL``.

    Only the class columns the queries use are densified (the heuristic reads no other), so
    memory is ``captions x classes of these queries``."""
    import torch

    from rudder.supervision import partial_labels

    parts = []
    for matrix in (nouns, verbs):
        cols = np.unique(matrix[queries].indices)
        parts += [
            torch.from_numpy(matrix[queries][:, cols].toarray()),
            torch.from_numpy(matrix[:, cols].toarray()),
        ]
    labels = partial_labels(parts[0], parts[2], parts[1], parts[3], alpha_n, alpha_v)
    labels = labels.to(torch.int16)
    labels[torch.arange(len(queries)), torch.from_numpy(queries)] = NO_LABEL
    return labels.numpy()


QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def query_statistics(
    noun_classes,
    verb_classes,
    alpha_n: float,
    alpha_v: float,
    max_queries: int = 5000,
    block: int = 256,
) -> dict:
    """Per-query counts of positive/partial/negative *other* captions (mean, median) and the
    distribution of their shares of the ``n - 1`` other captions (mean and the
    ``QUANTILES``, numpy's linear interpolation, in percent).

    Queries are all captions, or ``max_queries`` evenly spaced ones when there are more,
    labelled ``block`` at a time (:func:`_label_rows`).
    """
    n = len(noun_classes)
    queries = (
        np.arange(n)
        if n <= max_queries
        else np.unique(np.linspace(0, n - 1, max_queries).round().astype(int))
    )
    nouns, verbs = _sparse(noun_classes), _sparse(verb_classes)
    counts = np.zeros((len(queries), len(HEURISTIC_LABELS)), dtype=np.int64)
    for start in range(0, len(queries), block):
        q = queries[start : start + block]
        labels = _label_rows(nouns, verbs, q, alpha_n, alpha_v)
        for k, label in enumerate(HEURISTIC_LABELS):
            counts[start : start + len(q), k] = (labels == label).sum(1)
    empty = sum(1 for i in queries if not noun_classes[i] and not verb_classes[i])
    out: dict[str, Any] = {"captions": n, "queries": len(queries),
                           "queries_without_nouns_or_verbs": int(empty)}
    shares = 100.0 * counts / max(n - 1, 1)
    for k, name in enumerate(LABEL_NAMES):
        out[name] = {
            "mean": float(counts[:, k].mean()) if len(queries) else 0.0,
            "median": float(np.median(counts[:, k])) if len(queries) else 0.0,
            "share_percent": {
                "mean": float(shares[:, k].mean()) if len(queries) else 0.0,
                **{
                    f"p{round(100 * q)}": float(np.quantile(shares[:, k], q))
                    if len(queries)
                    else 0.0
                    for q in QUANTILES
                },
            },
        }
    return out


def sample_pairs(
    noun_classes, verb_classes, alpha_n: float, alpha_v: float, count: int, seed: int = 0
) -> list[tuple[int, int, int]]:
    """``count`` random (query, candidate, label) pairs of distinct captions, about a third
    of each label (partial gets the remainder; a label with too few pairs leaves its share
    to the others, in the order positive, negative, partial). Queries are drawn first (at
    most 500, uniformly without replacement), then pairs uniformly among those queries' pairs
    of each label; the order is shuffled."""
    n = len(noun_classes)
    if count < 1 or n < 2:
        return []
    rng = np.random.default_rng(seed)
    queries = np.sort(rng.choice(n, size=min(n, 500), replace=False))
    labels = _label_rows(_sparse(noun_classes), _sparse(verb_classes), queries, alpha_n, alpha_v)
    positive, negative, partial = PairLabel.POSITIVE, PairLabel.NEGATIVE, PairLabel.PARTIAL
    quota = {positive: count // 3, negative: count // 3, partial: count - 2 * (count // 3)}
    pools = {label: np.nonzero(labels == label) for label in quota}
    take = {label: min(len(pools[label][0]), share) for label, share in quota.items()}
    left = count - sum(take.values())
    for label in quota:  # what labels short of pairs left, in this order
        extra = min(left, len(pools[label][0]) - take[label])
        take[label], left = take[label] + extra, left - extra
    picked = []
    for label, (rows, cols) in pools.items():
        for k in rng.choice(len(rows), size=take[label], replace=False):
            picked.append((int(queries[rows[k]]), int(cols[k]), int(label)))
    return [picked[k] for k in rng.permutation(len(picked))]


def label_dataset(
    root,
    tagger,
    class_map: ClassMap,
    config: LabelConfig | None = None,
    dry_run: bool = False,
    overwrite: bool = False,
    cache=None,
) -> dict:
    """Label every split of the dataset at ``root``; returns ``{split: statistics}``.

    Existing noun/verb columns (manual annotations) are replaced only with ``overwrite``.
    With ``dry_run`` nothing is written.
    """
    config = config or LabelConfig()
    folder = DatasetFolder(root)
    state, tables = files_state(folder.root, "captions"), caption_tables(folder)
    present = sorted({c for t in tables.values() for c in t.column_names if c in NOUN_VERB_COLUMNS})
    if present and not overwrite and not dry_run:
        raise LabelError(
            f"{folder.root}: captions already have {present} (manual annotations?); "
            "pass --overwrite to replace them or --dry-run to only print statistics"
        )
    langs = config.langs and tuple(check_language(code, "label --langs") for code in config.langs)
    found = {code for t in tables.values() for code in t.column("lang").to_pylist()}
    if langs and not found & set(langs):
        raise LabelError(
            f"{folder.root}: no captions in {', '.join(langs)} "
            f"(the dataset has {', '.join(sorted(found))})"
        )
    for split, table in tables.items():
        _check(split, table, langs)
    _check_models(tagger, sorted(found & set(langs or found)))
    labelled = {
        split: annotate(table, tagger, class_map, config.options, cache, config.num_proc,
                        config.stop_nouns, config.rules, langs)
        for split, table in tables.items()
    }
    stats = {split: _split_statistics(t, config, langs) for split, t in labelled.items()}
    if not dry_run:
        with dataset_lock(folder.root):
            if files_state(folder.root, "captions") != state:
                raise LabelError(
                    f"{folder.root}: the captions changed while they were being labelled "
                    "(another label or translate run?); nothing was written. Rerun it (tags are "
                    "cached, so that is quick)"
                )
            replace_tables(folder.root, "captions", labelled)
    return stats


def _split_statistics(table: pa.Table, config: LabelConfig, langs) -> dict:
    """:func:`query_statistics` (and :func:`sample_pairs`) over the captions in ``langs``."""
    if langs:
        table = table.filter(pc.is_in(table.column("lang"), pa.array(langs)))
    columns = {c: table.column(c).to_pylist() for c in ("text", "lang", *NOUN_VERB_COLUMNS)}
    nouns, verbs = columns["noun_classes"], columns["verb_classes"]
    out = query_statistics(nouns, verbs, config.alpha_n, config.alpha_v, config.stats_queries)
    out["captions_with_stop_nouns"] = sum(
        len(counted_nouns(n or [], lang, config.stop_nouns or {})) < len(n or [])
        for lang, n in zip(columns["lang"], columns["nouns"], strict=True)
    )
    out["sample"] = [
        {
            "label": PairLabel(label).text,
            **{
                f"{role}_{key}": columns[key][i]
                for role, i in (("query", q), ("candidate", c))
                for key in ("text", "nouns", "verbs")
            },
        }
        for q, c, label in sample_pairs(
            nouns, verbs, config.alpha_n, config.alpha_v, config.sample_pairs, config.seed
        )
    ]
    return out


def format_statistics(stats: dict) -> str:
    """A Markdown table of :func:`label_dataset`'s statistics."""
    lines = [
        (
            "| split | captions | queries | positive mean / median | partial mean / median "
            "| negative mean / median | queries without nouns or verbs |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for split, s in stats.items():
        cells = [
            f"{s[name]['mean']:.2f} / {s[name]['median']:g}"
            for name in ("positive", "partial", "negative")
        ]
        lines.append(
            f"| {split} | {s['captions']} | {s['queries']} | {' | '.join(cells)} "
            f"| {s['queries_without_nouns_or_verbs']} |"
        )
    stopped = {split: s.get("captions_with_stop_nouns") for split, s in stats.items()}
    lines.append(f"\ncaptions with a stop-listed subject noun (not counted): {stopped}")
    lines += [
        "",
        "Per-query share of the other captions of the split, %:",
        "",
        "| split | label | mean | p10 | p25 | median | p75 | p90 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for split, s in stats.items():
        for name in ("positive", "partial", "negative"):
            share = s[name]["share_percent"]
            cells = [share[k] for k in ("mean", "p10", "p25", "p50", "p75", "p90")]
            lines.append(f"| {split} | {name} | " + " | ".join(f"{x:.2f}" for x in cells) + " |")
    for split, s in stats.items():
        if s.get("sample"):
            lines += ["", f"Sampled pairs of {split} (query -> candidate: label; nouns / verbs):"]
            lines += [_format_pair(k, pair) for k, pair in enumerate(s["sample"], start=1)]
    return "\n".join(lines)


def _format_pair(k: int, pair: dict) -> str:
    def side(role):
        nouns = ", ".join(pair[f"{role}_nouns"] or [])
        verbs = ", ".join(pair[f"{role}_verbs"] or [])
        return f"{pair[f'{role}_text']!r} [{nouns} / {verbs}]"

    return f"{k:2d}. {side('query')} -> {side('candidate')}: {pair['label']}"
