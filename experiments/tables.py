"""Result tables of a suite: mean ± std over seeds, 95% bootstrap intervals over queries, and
two Wilcoxon signed-rank readings of "A beats B"; markdown and CSV.

Definitions:
- mean ± std: over the seeds' test metrics as the trainer wrote them (``metrics.json``); std
  is the sample standard deviation (ddof=1; 0 with one seed), as ``rudder.train --seeds``.
- 95% interval: paired percentile bootstrap over test queries
  (:func:`rudder.significance.bootstrap_ci`, 1000 resamples, seed 0): each resample draws
  query indices with replacement, the *same* indices for every seed, computes the metric per
  seed and averages over seeds. It shows the uncertainty due to the finite query set, given
  the trained models; the std shows the seed-to-seed variation.
- Metrics of per-query values (definitions of :func:`rudder.metrics.metrics_from_ranks`
  on 0-based tie-averaged ranks): R@1 = 100 * mean(rank == 0), R@K = 100 * mean(rank < K),
  MdR = median(rank) + 1, MnR = mean(rank) + 1; nDCG and mAP = 100 * mean of the per-query
  values.
- Wilcoxon, on the t2v ranks of two rows over the seeds both rows have (two-sided, zero
  differences discarded), in two readings named in every output:
  per query (:func:`rudder.significance.wilcoxon_seed_averaged`): each test query's rank
  averaged over the seeds, paired by query; and across experiments, the RUDDER paper's
  reading (:func:`rudder.significance.wilcoxon_median_ranks`): each seed's median rank (MdR),
  paired by seed, whose p-value cannot go below 2 / 2**seeds.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

import numpy as np

from rudder import metrics, significance
from rudder.metric_names import RANK_AVERAGES, RECALL_KS, RECALLS, RELEVANCE_METRICS

from .collect import RowResult

RANK_METRICS = (*RECALLS, *RANK_AVERAGES)
SCORE_METRICS = RELEVANCE_METRICS
COLUMNS = RANK_METRICS + SCORE_METRICS
HEADERS = {name: f"R@{k}" for name, k in zip(RECALLS, RECALL_KS)}
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


def summarise(row: RowResult, n_resamples: int = N_RESAMPLES) -> dict:
    """``{direction: {metric: {mean, std, ci_low, ci_high}}}`` for the metrics the row has."""
    out = {}
    for d in DIRECTION_TITLES:
        out[d] = {}
        for name in COLUMNS:
            seeds = [m[d][name] for m in row.metrics if name in m.get(d, {})]
            if len(seeds) != len(row.metrics):
                continue
            entry = {
                "mean": float(np.mean(seeds)),
                "std": float(np.std(seeds, ddof=1)) if len(seeds) > 1 else 0.0,
                "ci_low": np.nan,
                "ci_high": np.nan,
            }
            values = per_query_values(row, d, name)
            if values is not None:
                ci = seed_mean_ci(values, name, n_resamples)
                if not np.isclose(ci.estimate, entry["mean"], rtol=0.0, atol=1e-6):
                    raise ValueError(
                        f"row {row.label!r}: {d} {name} from per-query values ({ci.estimate}) "
                        f"differs from metrics.json ({entry['mean']})"
                    )
                entry["ci_low"], entry["ci_high"] = ci.low, ci.high
            out[d][name] = entry
    return out


def compare(a: RowResult, b: RowResult, direction: str = "t2v") -> dict:
    """Both Wilcoxon readings of a vs b over their shared seeds (module docstring)."""
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
    per_query = significance.wilcoxon_seed_averaged(ra, rb)
    across = significance.wilcoxon_median_ranks(ra, rb)
    return {
        "a": a.label,
        "b": b.label,
        "direction": direction,
        "seeds": seeds,
        "queries": per_query.n_pairs,
        "nonzero": per_query.n_nonzero,
        "mean_rank_a": float(np.nanmean(ra) + 1),
        "mean_rank_b": float(np.nanmean(rb) + 1),
        "w_per_query": per_query.statistic,
        "p_per_query": per_query.pvalue,
        "mdr_a": list(across.median_ranks_a),
        "mdr_b": list(across.median_ranks_b),
        "w_mdr_across_seeds": across.test.statistic,
        "p_mdr_across_seeds": across.test.pvalue,
    }


def _cell(entry: dict, name: str) -> str:
    text = f"{entry['mean']:.1f} ± {entry['std']:.1f}"
    if not np.isnan(entry["ci_low"]):
        text += f" [{entry['ci_low']:.1f}, {entry['ci_high']:.1f}]"
    return text


def markdown(summaries: dict[str, dict], tests: Sequence[dict], header: str = "") -> str:
    """The suite's tables: one per direction (rows in order), then the Wilcoxon tests."""
    lines = [header.rstrip(), ""] if header else []
    for d, title in DIRECTION_TITLES.items():
        names = [n for n in COLUMNS if any(n in s[d] for s in summaries.values())]
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
    if tests:
        lines += [
            "## Wilcoxon signed-rank tests (text → video ranks)",
            "",
            (
                "Per query: each test query's rank averaged over the shared seeds, paired by "
                "query. Across seeds (the RUDDER paper's reading): each seed's median rank MdR, "
                "paired by seed; its p-value cannot go below 2 / 2^seeds."
            ),
            "",
            (
                "| A | B | queries | nonzero | mean rank A | mean rank B | W per query | "
                "p per query | MdR A by seed | MdR B by seed | W across seeds | p across seeds |"
            ),
            "|---" * 12 + "|",
        ]
        for t in tests:
            lines.append(
                f"| {t['a']} | {t['b']} | {t['queries']} | {t['nonzero']} | "
                f"{t['mean_rank_a']:.2f} | {t['mean_rank_b']:.2f} | {t['w_per_query']:.1f} | "
                f"{_p(t['p_per_query'])} | {_ranks(t['mdr_a'])} | {_ranks(t['mdr_b'])} | "
                f"{t['w_mdr_across_seeds']:.1f} | {_p(t['p_mdr_across_seeds'])} |"
            )
        lines.append("")
    return "\n".join(lines)


def _ranks(values) -> str:
    return " ".join(f"{v:g}" for v in values)


def _p(p: float) -> str:
    return f"{p:.2g}" if p >= 1e-4 else f"{p:.1e}"


def metrics_csv(suite: str, summaries: dict[str, dict], n_seeds: dict[str, int]) -> str:
    """Long CSV: suite,row,direction,metric,mean,std,ci_low,ci_high,seeds."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        ["suite", "row", "direction", "metric", "mean", "std", "ci_low", "ci_high", "seeds"]
    )
    for label, s in summaries.items():
        for d in DIRECTION_TITLES:
            for name, e in s[d].items():
                writer.writerow(
                    [
                        suite,
                        label,
                        d,
                        name,
                        *(_num(e[k]) for k in ("mean", "std", "ci_low", "ci_high")),
                        n_seeds[label],
                    ]
                )
    return buffer.getvalue()


TEST_KEYS = (
    "a",
    "b",
    "direction",
    "queries",
    "nonzero",
    "mean_rank_a",
    "mean_rank_b",
    "w_per_query",
    "p_per_query",
    "mdr_a",
    "mdr_b",
    "w_mdr_across_seeds",
    "p_mdr_across_seeds",
)


W_KEYS = ("w_per_query", "w_mdr_across_seeds")
W_DIGITS = 12  # W is a sum of tie-averaged ranks, a multiple of 0.5: exact below 1e11


def tests_csv(suite: str, tests: Sequence[dict]) -> str:
    """CSV of the Wilcoxon tests (``*_per_query``: seed-averaged ranks paired by query;
    ``*_mdr_across_seeds``: per-seed MdR paired by seed, the paper's reading)."""
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
