"""Result tables of a suite: mean ± std over seeds, 95% bootstrap intervals over queries,
Wilcoxon tests of "A beats B" per caption and per video with Holm's correction; markdown and CSV.

Definitions:
- mean ± std: over the seeds' test metrics as the trainer wrote them (``metrics.json``); std
  is the sample standard deviation (ddof=1; 0 with one seed), as ``rudder.train --seeds``.
- 95% interval: paired percentile bootstrap over test queries
  (:func:`rudder.evaluation.significance.bootstrap_ci`, 1000 resamples, seed 0): each resample draws
  query indices with replacement, the *same* indices for every seed, computes the metric per
  seed and averages over seeds. It shows the uncertainty due to the finite query set, given
  the trained models; the std shows the seed-to-seed variation.
- Metrics of per-query values (definitions of :func:`rudder.evaluation.metrics.metrics_from_ranks`
  on 0-based tie-averaged ranks): R@1 = 100 * mean(rank == 0), R@K = 100 * mean(rank < K),
  MdR = median(rank) + 1, MnR = mean(rank) + 1; nDCG and mAP = 100 * mean of the per-query
  values over the queries where they are defined (a query with no relevant item has none:
  n/a); ``queries`` says over how many. A metric defined for no query is n/a, and a column
  n/a in every row is left out of the markdown with a note.
- Tests (:func:`compare`), both directions, over the seeds both rows have, two-sided, zero
  differences discarded:
  per caption (t2v only; :func:`rudder.evaluation.significance.wilcoxon_seed_averaged`): each
  caption's rank averaged over the seeds, paired by caption; per video
  (:func:`rudder.evaluation.significance.wilcoxon_per_video`): the rank difference averaged over a
  video's captions and the seeds, paired by video (v2t queries are videos, so there the
  two coincide and only the per-video test is reported); the mean rank difference A - B with
  a 95% cluster-bootstrap interval over videos
  (:func:`rudder.evaluation.significance.cluster_bootstrap_mean_difference`); and each seed's median
  rank (MdR) paired by seed, whose p-value cannot go below 2 / 2**seeds. Holm's adjustment
  (:func:`rudder.evaluation.significance.holm`) runs over all the per-video p-values of a table
  (every comparison, both directions), and separately over its per-caption p-values.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

import numpy as np

from rudder.evaluation import metrics, significance
from rudder.evaluation.metric_names import RANK_AVERAGES, RECALL_KS, RECALLS, RELEVANCE_METRICS

from .collect import RowResult

RANK_METRICS = (*RECALLS, *RANK_AVERAGES)
SCORE_METRICS = RELEVANCE_METRICS
COLUMNS = RANK_METRICS + SCORE_METRICS
HEADERS = {name: f"R@{k}" for name, k in zip(RECALLS, RECALL_KS, strict=False)}
DIRECTION_TITLES = {"t2v": "Text → video", "v2t": "Video → text"}
N_RESAMPLES = 1000


def _statistic(name: str):
    """Vectorised metric over the last axis of per-query values (see module docstring)."""
    if name in SCORE_METRICS:
        return lambda v: 100.0 * np.mean(v, axis=-1)
    return metrics.rank_statistic(name)


def per_query_values(row: RowResult, direction: str, name: str) -> np.ndarray | None:
    """``(seeds, valid queries)`` values behind metric ``name`` (None when not available)."""
    if name in RANK_METRICS:
        values = row.ranks[direction]
    else:
        values = row.scores.get(direction, {}).get(name)
        if values is None:
            return None
    keep = ~np.isnan(values)
    if not (keep == keep[0]).all():
        raise ValueError(f"row {row.label!r}: seeds mask different {direction} queries")
    return values[:, keep[0]]


def seed_mean_ci(values: np.ndarray, name: str, n_resamples: int = N_RESAMPLES, seed: int = 0):
    """Paired bootstrap 95% interval of the seed-averaged metric (module docstring)."""
    stat = _statistic(name)

    def statistic(index: np.ndarray) -> np.ndarray:  # (B, n) resampled query indices
        return stat(values[:, index.astype(np.intp)]).mean(axis=0)

    return significance.bootstrap_ci(
        np.arange(values.shape[1], dtype=float), statistic, n_resamples, 0.95, seed
    )


def summarise(row: RowResult, n_resamples: int = N_RESAMPLES, relevance_from_json: bool = True):
    """``{direction: {metric: {mean, std, ci_low, ci_high[, queries]}}}`` for the metrics the
    row has; ``mean`` and ``std`` are None for an n/a metric. ``relevance_from_json=False``
    (a suite whose relevance definition differs from the trainer's): nDCG/mAP come from the
    per-query values rather than ``metrics.json``."""
    out = {}
    for d in DIRECTION_TITLES:
        out[d] = {}
        for name in COLUMNS:
            seeds = [m[d].get(name, MISSING) for m in row.metrics]
            if any(v is MISSING for v in seeds):
                continue
            values = per_query_values(row, d, name)
            if name in SCORE_METRICS and not relevance_from_json:
                if values is None:
                    continue
                seeds = [100 * float(np.mean(v)) if v.size else None for v in values]
            entry = _entry(seeds)
            if name in SCORE_METRICS:
                counts = {m[d].get(f"{name}_queries") for m in row.metrics}
                if values is not None:
                    counts = {values.shape[1]}
                entry["queries"] = counts.pop() if len(counts) == 1 else None
            if values is not None and values.shape[1] and entry["mean"] is not None:
                ci = seed_mean_ci(values, name, n_resamples)
                if not np.isclose(ci.estimate, entry["mean"], rtol=0.0, atol=1e-6):
                    raise ValueError(
                        f"row {row.label!r}: {d} {name} from per-query values ({ci.estimate}) "
                        f"differs from metrics.json ({entry['mean']})"
                    )
                entry["ci_low"], entry["ci_high"] = ci.low, ci.high
            out[d][name] = entry
    return out


MISSING = object()


def _entry(seeds: list) -> dict:
    """mean and std (ddof=1) over seeds; None (n/a) when any seed's value is None."""
    if any(v is None for v in seeds):
        return {"mean": None, "std": None, "ci_low": np.nan, "ci_high": np.nan}
    return {
        "mean": float(np.mean(seeds)),
        "std": float(np.std(seeds, ddof=1)) if len(seeds) > 1 else 0.0,
        "ci_low": np.nan,
        "ci_high": np.nan,
    }


def video_of_queries(row: RowResult, direction: str) -> np.ndarray:
    """The video index of each query: t2v rows are video-major (row r is caption r % K of video
    r // K, docs/architecture.md), v2t queries are the videos themselves."""
    videos = row.ranks["v2t"].shape[1]
    queries = row.ranks[direction].shape[1]
    if direction == "v2t":
        return np.arange(videos)
    if queries % videos:
        raise ValueError(f"row {row.label!r}: {queries} t2v queries for {videos} videos")
    return np.arange(queries) // (queries // videos)


def compare(a: RowResult, b: RowResult, direction: str = "t2v",
            n_resamples: int = N_RESAMPLES) -> dict:
    """The tests of a vs b in one direction over their shared seeds (module docstring)."""
    seeds = [s for s in a.seeds if s in b.seeds]
    if not seeds:
        raise ValueError(f"rows {a.label!r} and {b.label!r} share no seed")
    if (
        a.query_ids is not None
        and b.query_ids is not None
        and not np.array_equal(a.query_ids, b.query_ids)
    ):
        raise ValueError(f"rows {a.label!r} and {b.label!r} rank different test queries")
    ra = np.stack([a.ranks[direction][a.seeds.index(s)] for s in seeds])
    rb = np.stack([b.ranks[direction][b.seeds.index(s)] for s in seeds])
    videos = video_of_queries(a, direction)
    per_video = significance.wilcoxon_per_video(ra, rb, videos)
    diff = significance.cluster_bootstrap_mean_difference(ra, rb, videos, n_resamples)
    across = significance.wilcoxon_median_ranks(ra, rb)
    out = {
        "a": a.label,
        "b": b.label,
        "direction": direction,
        "seeds": seeds,
        "videos": per_video.n_pairs,
        "nonzero_videos": per_video.n_nonzero,
        "mean_rank_a": float(np.nanmean(ra) + 1),
        "mean_rank_b": float(np.nanmean(rb) + 1),
        "mean_rank_diff": diff.estimate,
        "diff_ci_low_video": diff.low,
        "diff_ci_high_video": diff.high,
        "w_video": per_video.statistic,
        "p_video": per_video.pvalue,
        "p_video_holm": np.nan,
        "captions": np.nan,
        "nonzero_captions": np.nan,
        "w_caption": np.nan,
        "p_caption": np.nan,
        "p_caption_holm": np.nan,
        "mdr_a": [],
        "mdr_b": [],
        "w_mdr_across_seeds": np.nan,
        "p_mdr_across_seeds": np.nan,
    }
    if direction == "t2v":
        per_caption = significance.wilcoxon_seed_averaged(ra, rb)
        out.update(
            captions=per_caption.n_pairs,
            nonzero_captions=per_caption.n_nonzero,
            w_caption=per_caption.statistic,
            p_caption=per_caption.pvalue,
        )
    out.update(
        mdr_a=list(across.median_ranks_a),
        mdr_b=list(across.median_ranks_b),
        w_mdr_across_seeds=across.test.statistic,
        p_mdr_across_seeds=across.test.pvalue,
    )
    return out


def adjust(tests: Sequence[dict]) -> list[dict]:
    """The tests with Holm-adjusted p-values over the table: ``p_video_holm`` over all
    per-video p-values, ``p_caption_holm`` over all per-caption ones."""
    out = [dict(t) for t in tests]
    for key in ("p_video", "p_caption"):
        adjusted = significance.holm([t[key] for t in out])
        for t, value in zip(out, adjusted, strict=True):
            t[f"{key}_holm"] = float(value)
    return out


def _cell(entry: dict, name: str) -> str:
    if entry["mean"] is None:
        return NA
    text = f"{entry['mean']:.1f} ± {entry['std']:.1f}"
    if not np.isnan(entry["ci_low"]):
        text += f" [{entry['ci_low']:.1f}, {entry['ci_high']:.1f}]"
    return text


NA = "n/a"


def _all_na(summaries: dict, d: str, name: str) -> bool:
    present = [s[d][name] for s in summaries.values() if name in s[d]]
    return bool(present) and all(e["mean"] is None for e in present)


def markdown(summaries: dict[str, dict], tests: Sequence[dict], header: str = "",
             notes: Sequence[str] = ()) -> str:
    """The suite's tables: one per direction (rows in order), then the tests (with Holm's
    adjustment already applied, :func:`adjust`). ``notes``: lines under the metric tables."""
    lines = [header.rstrip(), ""] if header else []
    for d, title in DIRECTION_TITLES.items():
        present = [n for n in COLUMNS if any(n in s[d] for s in summaries.values())]
        dropped = [n for n in present if _all_na(summaries, d, n)]
        names = [n for n in present if n not in dropped]
        lines += [
            f"## {title}",
            "",
            "| | " + " | ".join(HEADERS.get(n, n) for n in names) + " |",
            "|---" * (len(names) + 1) + "|",
        ]
        for label, s in summaries.items():
            cells = [_cell(s[d][n], n) if n in s[d] else "–" for n in names]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
        for n in dropped:
            lines.append(f"{n}: n/a in every row (no query has a relevant item, R "
                         f"{'= 1' if n == 'mAP' else '> 0'}, at the protocol's rho); "
                         "column left out.")
        counts = sorted({str(s[d][n].get("queries")) for s in summaries.values()
                         for n in SCORE_METRICS if n in s[d] and n not in dropped})
        if counts:
            lines.append(f"nDCG/mAP computed over the queries with a relevant item: "
                         f"{', '.join(counts)} (the CSV's `queries`).")
        if dropped or counts:
            lines.append("")
    lines += [*notes, ""] if notes else []
    if tests:
        lines += [
            "## Wilcoxon signed-rank tests",
            "",
            (
                "Per video: the rank difference A - B averaged over each video's captions and "
                "the shared seeds, paired by video (the test to read: captions of one video "
                "are not independent). Mean diff: mean rank A - mean rank B over all queries "
                "and seeds, [95% cluster-bootstrap interval resampling videos]; negative = A "
                "ranks better. Per caption (text → video only): each caption's rank averaged "
                "over the seeds, paired by caption. Holm: adjusted over all the table's "
                "per-video (per-caption) p-values. MdR by seed: each seed's median rank, "
                "paired by seed; its p-value cannot go below 2 / 2^seeds."
            ),
            "",
            (
                "| A | B | direction | videos | mean rank A | mean rank B | mean diff [95% CI, "
                "videos] | p per video | p per video, Holm | captions | p per caption | "
                "p per caption, Holm | MdR A by seed | MdR B by seed | p MdR by seed |"
            ),
            "|---" * 15 + "|",
        ]
        for t in tests:
            caption = t["direction"] == "t2v"
            lines.append(
                f"| {t['a']} | {t['b']} | {t['direction']} | {t['videos']} | "
                f"{t['mean_rank_a']:.2f} | {t['mean_rank_b']:.2f} | "
                f"{t['mean_rank_diff']:+.2f} [{t['diff_ci_low_video']:+.2f}, "
                f"{t['diff_ci_high_video']:+.2f}] | {_p(t['p_video'])} | "
                f"{_p(t['p_video_holm'])} | "
                + (f"{t['captions']} | {_p(t['p_caption'])} | {_p(t['p_caption_holm'])} | "
                   if caption else "– | – | – | ")
                + f"{_ranks(t['mdr_a'])} | {_ranks(t['mdr_b'])} | "
                f"{_p(t['p_mdr_across_seeds'])} |"
            )
        lines.append("")
    return "\n".join(lines)


def _ranks(values) -> str:
    return " ".join(f"{v:g}" for v in values)


def _p(p: float) -> str:
    if p is None or np.isnan(p):
        return "–"
    return f"{p:.2g}" if p >= 1e-4 else f"{p:.1e}"


CSV_COLUMNS = ("suite", "row", "direction", "metric", "mean", "std", "ci_low", "ci_high",
               "seeds", "queries")
CAP_METRIC = "runs_at_epoch_cap"


def metrics_csv(suite: str, summaries: dict[str, dict], n_seeds: dict[str, int],
                at_cap: dict[str, int] | None = None) -> str:
    """Long CSV: suite,row,direction,metric,mean,std,ci_low,ci_high,seeds,queries. An n/a
    value is written ``n/a``; ``queries`` is the number of queries of nDCG/mAP. ``at_cap``:
    per row, the number of its runs that stopped at the epoch cap (a ``runs_at_epoch_cap``
    line, direction ``-``)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for label, s in summaries.items():
        for d in DIRECTION_TITLES:
            for name, e in s[d].items():
                values = [NA, NA, "", ""] if e["mean"] is None else [
                    _num(e[k]) for k in ("mean", "std", "ci_low", "ci_high")]
                queries = e.get("queries")
                writer.writerow([suite, label, d, name, *values, n_seeds[label],
                                 "" if queries is None else queries])
        if at_cap is not None:
            writer.writerow([suite, label, "-", CAP_METRIC, at_cap[label], "", "", "",
                             n_seeds[label], ""])
    return buffer.getvalue()


TEST_KEYS = (
    "a",
    "b",
    "direction",
    "videos",
    "nonzero_videos",
    "mean_rank_a",
    "mean_rank_b",
    "mean_rank_diff",
    "diff_ci_low_video",
    "diff_ci_high_video",
    "w_video",
    "p_video",
    "p_video_holm",
    "captions",
    "nonzero_captions",
    "w_caption",
    "p_caption",
    "p_caption_holm",
    "mdr_a",
    "mdr_b",
    "w_mdr_across_seeds",
    "p_mdr_across_seeds",
)


W_KEYS = ("w_video", "w_caption", "w_mdr_across_seeds")
W_DIGITS = 12  # W is a sum of tie-averaged ranks, a multiple of 0.5: exact below 1e11


def tests_csv(suite: str, tests: Sequence[dict]) -> str:
    """CSV of the tests (module docstring): ``*_video`` per video (the rank difference
    averaged per video, paired by video; the interval a cluster bootstrap over videos),
    ``*_caption`` per caption (t2v only; empty for v2t), ``*_holm`` Holm-adjusted over the
    table, ``*_mdr_across_seeds`` per-seed MdR paired by seed."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["suite", *TEST_KEYS, "seeds"])
    for t in tests:
        cells = [
            _ranks(t[k]) if isinstance(t[k], list) else _num(t[k], W_DIGITS if k in W_KEYS else 6)
            for k in TEST_KEYS
        ]
        writer.writerow([suite, *cells, " ".join(map(str, t["seeds"]))])
    return buffer.getvalue()


def _num(value, digits: int = 6):
    """A float with ``digits`` significant digits ("" for NaN); anything else as is."""
    if isinstance(value, float):
        return "" if np.isnan(value) else f"{value:.{digits}g}"
    return value
