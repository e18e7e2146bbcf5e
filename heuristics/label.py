"""``python -m heuristics label``: add noun/verb/class columns to a dataset's captions.

Each caption is tagged (a Stanza or lexicon tagger, through the tag cache), its nouns and
verbs extracted (:mod:`heuristics.nouns_verbs`) and mapped to concept ids
(:mod:`heuristics.classes`). The new ``captions`` tables replace the old ones with
:func:`rudder.data.layout.replace_tables` (all splits or none), so a failed run leaves the
dataset unchanged. The statistics one tunes alpha on come from
:func:`rudder.supervision.partial_labels` over the class sets: for each query caption of a
split, the number of *other* captions of the split that are positive, partial or
negative for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from heuristics.class_rules import ClassRules, corpus_vocabulary, extract_classes
from heuristics.classes import ClassMap
from heuristics.nouns_verbs import ExtractionOptions
from heuristics.stop_nouns import counted_nouns, default_stop_nouns
from heuristics.taggers import TaggerError, check_texts, tag_texts
from rudder.data.layout import LABEL_COLUMNS, SPLITS, DatasetFolder, replace_tables
from rudder.languages import check_language

LABEL_NAMES = ("negative", "partial", "positive")


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


def caption_tables(folder: DatasetFolder) -> dict[str, pa.Table]:
    tables = {}
    for split in SPLITS:
        if (folder.root / "captions" / f"{split}.parquet").is_file():
            tables[split] = folder.captions(split)
    if not tables:
        raise LabelError(f"{folder.root}: no captions to label")
    return tables


def _check(split: str, table: pa.Table) -> None:
    ids = table.column("caption_id").to_pylist()
    langs = table.column("lang").to_pylist()
    texts = table.column("text").to_pylist()
    for i, lang in enumerate(langs):
        check_language(lang, f"captions/{split}.parquet, caption {ids[i]!r}")
    for lang in sorted(set(langs)):
        rows = [i for i, code in enumerate(langs) if code == lang]
        try:
            check_texts(
                [texts[i] for i in rows],
                lang,
                names=[f"{ids[i]!r} in captions/{split}.parquet" for i in rows],
            )
        except TaggerError as error:
            raise LabelError(str(error)) from None


def annotate(
    table: pa.Table,
    tagger,
    class_map: ClassMap,
    options: ExtractionOptions,
    cache=None,
    num_proc: int = 1,
    stop_nouns=None,
    rules: ClassRules | None = None,
) -> pa.Table:
    """``table`` with ``nouns``, ``verbs``, ``noun_classes``, ``verb_classes`` (re)placed;
    the class-map ``rules`` apply, and ``stop_nouns`` are left out of ``noun_classes``."""
    langs = table.column("lang").to_pylist()
    texts = table.column("text").to_pylist()
    columns = {name: [None] * len(texts) for name in LABEL_COLUMNS}
    for lang in sorted(set(langs)):
        rows = [i for i, code in enumerate(langs) if code == lang]
        tagged = tag_texts(tagger, [texts[i] for i in rows], lang, cache=cache, num_proc=num_proc)
        vocabulary = corpus_vocabulary(tagged, lang)
        for i, words in zip(rows, tagged):
            nouns, verbs, _, verb_classes = extract_classes(
                words, lang, class_map, options, rules or ClassRules(), vocabulary
            )
            columns["nouns"][i], columns["verbs"][i] = nouns, verbs
            counted = counted_nouns(nouns, lang, stop_nouns or {})
            columns["noun_classes"][i] = class_map.classes("noun", lang, counted)
            columns["verb_classes"][i] = verb_classes
    keep = [name for name in table.column_names if name not in LABEL_COLUMNS]
    out = table.select(keep)
    for name in LABEL_COLUMNS:
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


def query_statistics(
    noun_classes,
    verb_classes,
    alpha_n: float,
    alpha_v: float,
    max_queries: int = 5000,
    block: int = 256,
) -> dict:
    """Per-query counts of positive/partial/negative *other* captions: mean and median.

    Queries are all captions, or ``max_queries`` evenly spaced ones when there are more.
    Each block of queries keeps only the class columns its queries use (the heuristic
    reads no other column), so memory is ``captions x block classes``.
    """
    import torch

    from rudder.supervision import partial_labels

    n = len(noun_classes)
    queries = (
        np.arange(n)
        if n <= max_queries
        else np.unique(np.linspace(0, n - 1, max_queries).round().astype(int))
    )
    nouns, verbs = _sparse(noun_classes), _sparse(verb_classes)
    counts = np.zeros((len(queries), 3), dtype=np.int64)
    for start in range(0, len(queries), block):
        q = queries[start : start + block]
        parts = []
        for matrix in (nouns, verbs):
            cols = np.unique(matrix[q].indices)
            parts += [
                torch.from_numpy(matrix[q][:, cols].toarray()),
                torch.from_numpy(matrix[:, cols].toarray()),
            ]
        labels = partial_labels(parts[0], parts[2], parts[1], parts[3], alpha_n, alpha_v).to(
            torch.int16
        )
        labels[torch.arange(len(q)), torch.from_numpy(q)] = -1  # a caption is not its own candidate
        for k in range(3):
            counts[start : start + len(q), k] = (labels == k).sum(1).numpy()
    empty = sum(1 for i in queries if not noun_classes[i] and not verb_classes[i])
    out = {"captions": n, "queries": len(queries), "queries_without_nouns_or_verbs": int(empty)}
    for k, name in enumerate(LABEL_NAMES):
        out[name] = {
            "mean": float(counts[:, k].mean()) if len(queries) else 0.0,
            "median": float(np.median(counts[:, k])) if len(queries) else 0.0,
        }
    return out


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

    Existing label columns (manual annotations) are replaced only with ``overwrite``.
    With ``dry_run`` nothing is written.
    """
    config = config or LabelConfig()
    folder = DatasetFolder(root)
    tables = caption_tables(folder)
    present = sorted({c for t in tables.values() for c in t.column_names if c in LABEL_COLUMNS})
    if present and not overwrite and not dry_run:
        raise LabelError(
            f"{folder.root}: captions already have {present} (manual annotations?); "
            "pass --overwrite to replace them or --dry-run to only print statistics"
        )
    for split, table in tables.items():
        _check(split, table)
    labelled = {
        split: annotate(
            table,
            tagger,
            class_map,
            config.options,
            cache,
            config.num_proc,
            config.stop_nouns,
            config.rules,
        )
        for split, table in tables.items()
    }
    stats = {
        split: query_statistics(
            t.column("noun_classes").to_pylist(),
            t.column("verb_classes").to_pylist(),
            config.alpha_n,
            config.alpha_v,
            config.stats_queries,
        )
        for split, t in labelled.items()
    }
    for split, t in labelled.items():
        rows = zip(t.column("lang").to_pylist(), t.column("nouns").to_pylist())
        stats[split]["captions_with_stop_nouns"] = sum(
            len(counted_nouns(n, lang, config.stop_nouns or {})) < len(n) for lang, n in rows
        )
    if not dry_run:
        replace_tables(folder.root, "captions", labelled)
    return stats


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
    return "\n".join(lines)
