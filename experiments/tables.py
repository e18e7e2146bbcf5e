"""Result tables of a suite: mean ± std over runs, 95% bootstrap intervals over queries,
tests of "A beats B" over training runs and videos (and, with the trained models taken as
fixed, per caption and per video) with Holm's correction; markdown and CSV.

Every number comes from per-query values (each run's rank of every query's own item, and
its nDCG/mAP where the data have classes), so ``python -m experiments.report`` recomputes a
table from the committed ``<suite>-ranks.npz`` alone.

Definitions:
- Metrics of per-query values (definitions of :func:`rudder.evaluation.metrics.metrics_from_ranks`
  on 0-based tie-averaged ranks): R@1 = 100 * mean(rank == 0), R@K = 100 * mean(rank < K),
  MdR = median(rank) + 1, MnR = mean(rank) + 1; nDCG and mAP = 100 * mean of the per-query
  values over the queries where they are defined (nDCG: a query with an item of relevance
  > 0; mAP: one with an item of relevance exactly 1); ``queries`` says over how many. A
  metric defined for no query is n/a, and a column n/a in every row is left out of the
  markdown with a note. :func:`check_against_metrics` checks each run's value against its
  ``metrics.json`` when the archive is made.
- mean ± std: over the runs' metrics; std is the sample standard deviation (ddof=1), n/a
  for a row of one run (a fusion of every seed pooled into one model).
- 95% interval: paired percentile bootstrap over test queries
  (:func:`rudder.evaluation.significance.bootstrap_ci`, 1000 resamples, seed 0): each resample draws
  query indices with replacement, the *same* indices for every run, computes the metric per
  run and averages over runs. It shows the uncertainty due to the finite query set, given
  the trained models; the std shows the run-to-run variation.
- Tests (:func:`compare`), both directions, two-sided:
  runs x videos (:func:`rudder.evaluation.significance.crossed_random_effects_test`, the
  test claims rest on): the difference of mean ranks over all runs of each row, against its
  variance under a mixed model with random run and video effects; its bootstrap
  counterpart (:func:`rudder.evaluation.significance.hierarchical_bootstrap`, 10,000
  resamples, seed 0). Taking each seed's model as fixed, over the seeds both rows have,
  zero differences discarded: per caption (t2v only;
  :func:`rudder.evaluation.significance.wilcoxon_seed_averaged`): each caption's rank averaged
  over the seeds, paired by caption; per video
  (:func:`rudder.evaluation.significance.wilcoxon_per_video`): the rank difference averaged over a
  video's captions and the seeds, paired by video (v2t queries are videos, so there the
  two coincide and only the per-video test is reported), with a 95% cluster-bootstrap
  interval over videos (:func:`rudder.evaluation.significance.cluster_bootstrap_mean_difference`);
  and each seed's median rank (MdR) paired by seed, whose p-value cannot go below
  2 / 2**seeds. Holm's adjustment (:func:`rudder.evaluation.significance.holm`) runs over
  all the p-values of one test in a table (every comparison, both directions).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

import numpy as np

from rudder.evaluation import metrics, significance
from rudder.metric_names import RANK_AVERAGES, RECALL_KS, RECALLS, RELEVANCE_METRICS

from .collect import RowResult

RANK_METRICS = (*RECALLS, *RANK_AVERAGES)
SCORE_METRICS = RELEVANCE_METRICS
COLUMNS = RANK_METRICS + SCORE_METRICS
HEADERS = {name: f"R@{k}" for name, k in zip(RECALLS, RECALL_KS, strict=False)}
DIRECTION_TITLES = {"t2v": "Text → video", "v2t": "Video → text"}
N_RESAMPLES = 1000
BOOT_RESAMPLES = 10_000  # the two-level bootstrap test's resamples (its smallest p: 2e-4)


def _statistic(name: str):
    """Vectorised metric over the last axis of per-query values (see module docstring)."""
    if name in SCORE_METRICS:
        return lambda v: 100.0 * np.mean(v, axis=-1)
    return metrics.rank_statistic(name)


def per_query_values(row: RowResult, direction: str, name: str) -> np.ndarray | None:
    """``(seeds, valid queries)`` values behind metric ``name`` (None when not available)."""
    values: np.ndarray | None
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


def summarise(row: RowResult, n_resamples: int = N_RESAMPLES):
    """``{direction: {metric: {mean, std, ci_low, ci_high[, queries]}}}`` from the row's
    per-query values (ranks; nDCG/mAP where the row has them): each run's metric, then the
    mean and std over runs (std None with one run: no spread), and the paired bootstrap
    interval; ``mean`` and ``std`` are None for a metric defined for no query (n/a)."""
    out: dict[str, Any] = {}
    for d in DIRECTION_TITLES:
        out[d] = {}
        for name in COLUMNS:
            values = per_query_values(row, d, name)
            if values is None:
                continue
            stat = _statistic(name)
            seeds = [float(stat(v)) if v.size else None for v in values]
            entry = _entry(seeds)
            if name in SCORE_METRICS:
                entry["queries"] = int(values.shape[1])
            if values.shape[1] and entry["mean"] is not None:
                ci = seed_mean_ci(values, name, n_resamples)
                entry["ci_low"], entry["ci_high"] = ci.low, ci.high
            out[d][name] = entry
    return out


def check_against_metrics(row: RowResult, scores: bool = True) -> None:
    """Each run's metric from its per-query values must equal its ``metrics.json`` (an error
    naming the row otherwise): the tables are recomputed from the per-query values.
    ``scores=False``: nDCG/mAP are not compared (a suite whose relevance definition is not
    the trainer's)."""
    names = COLUMNS if scores else RANK_METRICS
    for seed, recorded in zip(row.seeds, row.metrics, strict=True):
        for d in DIRECTION_TITLES:
            for name in names:
                if recorded[d].get(name, MISSING) is MISSING:
                    continue
                values = per_query_values(row, d, name)
                if values is None:
                    raise ValueError(f"row {row.label!r}: metrics.json has {d} {name} but no "
                                     "per-query values were computed")
                run = values[row.seeds.index(seed)]
                value = float(_statistic(name)(run)) if run.size else None
                expected = recorded[d][name]
                if (value is None) != (expected is None) or (
                        value is not None and not np.isclose(value, expected, rtol=0, atol=1e-6)):
                    raise ValueError(
                        f"row {row.label!r}, seed {seed}: {d} {name} from per-query values "
                        f"({value}) differs from metrics.json ({expected})"
                    )


MISSING = object()


def _entry(seeds: list) -> dict:
    """mean and std (ddof=1; None with one run) over runs; None (n/a) when any is None."""
    if any(v is None for v in seeds):
        return {"mean": None, "std": None, "ci_low": np.nan, "ci_high": np.nan}
    return {
        "mean": float(np.mean(seeds)),
        "std": float(np.std(seeds, ddof=1)) if len(seeds) > 1 else None,
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


TEST_METRICS = ("rank", *SCORE_METRICS)  # what a comparison can be tested on


def test_values(row: RowResult, direction: str, metric: str = "rank", seeds=None) -> np.ndarray:
    """``(runs, queries)`` values a test compares: 0-based ranks (lower is better), or a
    relevance metric's per-query values in percent (higher is better), NaN where a query has
    none; the runs of ``seeds``, in that order, when given."""
    if metric == "rank":
        values = row.ranks[direction]
    else:
        scores = row.scores.get(direction, {}).get(metric)
        if scores is None:
            raise ValueError(f"row {row.label!r} has no per-query {metric} to test")
        values = 100.0 * scores
    return values if seeds is None else np.stack([values[row.seeds.index(s)] for s in seeds])


def compare(a: RowResult, b: RowResult, direction: str = "t2v", metric: str = "rank",
            n_resamples: int = N_RESAMPLES, boot_resamples: int | None = None) -> dict:
    """The tests of a vs b in one direction on ``metric`` (module docstring): over all runs
    of each row (runs x videos), and over their shared seeds (the trained models taken as
    fixed). ``mean_a``/``mean_b``: the mean rank (1-based) or the metric in percent; ``diff``
    = A - B of the per-query values (for ranks negative, for nDCG/mAP positive, means A is
    better); the MdR-by-seed test is for ranks only."""
    if metric not in TEST_METRICS:
        raise ValueError(f"unknown test metric {metric!r}; use one of {list(TEST_METRICS)}")
    seeds = [s for s in a.seeds if s in b.seeds]
    if not seeds:
        raise ValueError(f"rows {a.label!r} and {b.label!r} share no seed")
    if (
        a.query_ids is not None
        and b.query_ids is not None
        and not np.array_equal(a.query_ids, b.query_ids)
    ):
        raise ValueError(f"rows {a.label!r} and {b.label!r} rank different test queries")
    videos = video_of_queries(a, direction)
    all_a, all_b = test_values(a, direction, metric), test_values(b, direction, metric)
    offset = 1.0 if metric == "rank" else 0.0  # mean rank is 1-based
    out: dict[str, Any] = {  # the row: labels, counts and statistics (NaN until computed)
        "a": a.label,
        "b": b.label,
        "direction": direction,
        "metric": metric,
        "runs_a": len(all_a),
        "runs_b": len(all_b),
        "videos": np.nan,
        "mean_a": float(np.nanmean(all_a) + offset),
        "mean_b": float(np.nanmean(all_b) + offset),
        "diff": np.nan,
        "se_runs": np.nan,
        "df_runs": np.nan,
        "diff_ci_low_runs": np.nan,
        "diff_ci_high_runs": np.nan,
        "p_runs": np.nan,
        "p_runs_holm": np.nan,
        "diff_ci_low_boot": np.nan,
        "diff_ci_high_boot": np.nan,
        "p_boot": np.nan,
        "p_boot_holm": np.nan,
    }
    if min(len(all_a), len(all_b)) >= 2:
        crossed = significance.crossed_random_effects_test(all_a, all_b, videos)
        boot = significance.hierarchical_bootstrap(all_a, all_b, videos,
                                                   boot_resamples or BOOT_RESAMPLES)
        out.update(
            diff=crossed.estimate, se_runs=crossed.se, df_runs=crossed.df,
            diff_ci_low_runs=crossed.low, diff_ci_high_runs=crossed.high, p_runs=crossed.pvalue,
            diff_ci_low_boot=boot.low, diff_ci_high_boot=boot.high, p_boot=boot.pvalue,
        )
    ra, rb = test_values(a, direction, metric, seeds), test_values(b, direction, metric, seeds)
    per_video = significance.wilcoxon_per_video(ra, rb, videos)
    diff = significance.cluster_bootstrap_mean_difference(ra, rb, videos, n_resamples)
    if np.isnan(out["diff"]):
        out["diff"] = float(np.nanmean(all_a) - np.nanmean(all_b))
    out.update(
        videos=per_video.n_pairs,
        nonzero_videos=per_video.n_nonzero,
        diff_ci_low_video=diff.low,
        diff_ci_high_video=diff.high,
        w_video=per_video.statistic,
        p_video=per_video.pvalue,
        p_video_holm=np.nan,
        captions=np.nan,
        nonzero_captions=np.nan,
        w_caption=np.nan,
        p_caption=np.nan,
        p_caption_holm=np.nan,
        mdr_a=[],
        mdr_b=[],
        w_mdr_across_seeds=np.nan,
        p_mdr_across_seeds=np.nan,
        seeds=seeds,
    )
    if metric == "rank":
        across = significance.wilcoxon_median_ranks(ra, rb)
        out.update(
            mdr_a=list(across.median_ranks_a),
            mdr_b=list(across.median_ranks_b),
            w_mdr_across_seeds=across.test.statistic,
            p_mdr_across_seeds=across.test.pvalue,
        )
    if direction == "t2v":
        per_caption = significance.wilcoxon_seed_averaged(ra, rb)
        out.update(
            captions=per_caption.n_pairs,
            nonzero_captions=per_caption.n_nonzero,
            w_caption=per_caption.statistic,
            p_caption=per_caption.pvalue,
        )
    return out


HOLM_KEYS = ("p_runs", "p_boot", "p_video", "p_caption")


def adjust(tests: Sequence[dict]) -> list[dict]:
    """The tests with Holm-adjusted p-values over the table, each test separately
    (``p_runs_holm`` over all the runs x videos p-values, ``p_boot_holm``, ``p_video_holm``,
    ``p_caption_holm``)."""
    out = [dict(t) for t in tests]
    for key in HOLM_KEYS:
        adjusted = significance.holm([t[key] for t in out])
        for t, value in zip(out, adjusted, strict=True):
            t[f"{key}_holm"] = float(value)
    return out


def _cell(entry: dict, name: str) -> str:
    if entry["mean"] is None:
        return NA
    spread = NA if entry["std"] is None else f"{entry['std']:.1f}"
    text = f"{entry['mean']:.1f} ± {spread}"
    if not np.isnan(entry["ci_low"]):
        text += f" [{entry['ci_low']:.1f}, {entry['ci_high']:.1f}]"
    return text


NA = "n/a"
RELEVANT = {"nDCG": "R > 0", "mAP": "R = 1"}  # the items each metric counts as relevant


def _all_na(summaries: dict, d: str, name: str) -> bool:
    present = [s[d][name] for s in summaries.values() if name in s[d]]
    return bool(present) and all(e["mean"] is None for e in present)


def _score_notes(summaries: dict, d: str, dropped: list[str]) -> list[str]:
    """What each relevance metric was computed over (or why it is left out)."""
    lines = []
    for name in SCORE_METRICS:
        counts = sorted({s[d][name]["queries"] for s in summaries.values() if name in s[d]})
        if not counts:
            continue
        if name in dropped:
            lines.append(f"{name}: n/a in every row, so the column is left out: no query has an "
                         f"item with {RELEVANT[name]} at the protocol's rho.")
        else:
            lines.append(f"{name}: the mean over the queries that have an item with "
                         f"{RELEVANT[name]} ({', '.join(map(str, counts))} queries here; a "
                         "query with none has no value; the CSV's `queries`).")
    return lines


TEST_NOTE = (
    "**Runs x videos** (the test to read; `rudder.evaluation.significance."
    "crossed_random_effects_test`): the difference A - B of the metric's mean over all runs "
    "of each row and all queries (mean rank: negative = A ranks better; nDCG, mAP in percent: "
    "positive = A is better), against its variance under a linear "
    "mixed model with random training-run and video effects (method-of-moments components, "
    "Satterthwaite df); the unit of replication is the training run, and the videos are a "
    "second random factor. [95% interval]. **Bootstrap**: the two-level bootstrap "
    "(`hierarchical_bootstrap`: runs, then videos; conservative). Holm: adjusted over all the "
    "table's p-values of that test. The next columns take each seed's trained model as fixed "
    "(they compare these models, not the losses): **per video**, the Wilcoxon signed-rank test "
    "of the rank difference averaged over each video's captions and the shared seeds, paired "
    "by video; **per caption** (text → video only), each caption's rank averaged over the "
    "seeds, paired by caption; **MdR by seed**, each seed's median rank paired by seed (its "
    "p-value cannot go below 2 / 2^seeds). experiments/README.md gives how often each test "
    "rejects between runs of one configuration."
)


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
        score_notes = _score_notes(summaries, d, dropped)
        if score_notes:
            lines += [*score_notes, ""]
    lines += [*notes, ""] if notes else []
    if tests:
        lines += [
            "## Tests",
            "",
            TEST_NOTE,
            "",
            (
                "| A | B | direction | metric | runs A, B | videos | mean A | mean B | "
                "diff [95% CI] | p, runs x videos | Holm | bootstrap [95% CI] | p, bootstrap | "
                "Holm | p per video | Holm | p per caption | Holm | MdR A by seed | "
                "MdR B by seed | p MdR by seed |"
            ),
            "|---" * 21 + "|",
        ]
        for t in tests:
            caption = t["direction"] == "t2v"
            metric = "mean rank" if t["metric"] == "rank" else t["metric"]
            lines.append(
                f"| {t['a']} | {t['b']} | {t['direction']} | {metric} | "
                f"{t['runs_a']}, {t['runs_b']} | "
                f"{t['videos']} | {t['mean_a']:.2f} | {t['mean_b']:.2f} | "
                f"{t['diff']:+.2f} {_interval(t, 'runs')} | {_p(t['p_runs'])} | "
                f"{_p(t['p_runs_holm'])} | {_interval(t, 'boot')} | {_p(t['p_boot'])} | "
                f"{_p(t['p_boot_holm'])} | {_p(t['p_video'])} | {_p(t['p_video_holm'])} | "
                + (f"{_p(t['p_caption'])} | {_p(t['p_caption_holm'])} | " if caption
                   else "– | – | ")
                + f"{_ranks(t['mdr_a']) or '–'} | {_ranks(t['mdr_b']) or '–'} | "
                f"{_p(t['p_mdr_across_seeds'])} |"
            )
        lines.append("")
    return "\n".join(lines)


def _interval(test: dict, kind: str) -> str:
    low, high = test[f"diff_ci_low_{kind}"], test[f"diff_ci_high_{kind}"]
    return "–" if np.isnan(low) else f"[{low:+.2f}, {high:+.2f}]"


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
                    NA if e[k] is None else _num(e[k])
                    for k in ("mean", "std", "ci_low", "ci_high")]
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
    "metric",
    "runs_a",
    "runs_b",
    "videos",
    "mean_a",
    "mean_b",
    "diff",
    "se_runs",
    "df_runs",
    "diff_ci_low_runs",
    "diff_ci_high_runs",
    "p_runs",
    "p_runs_holm",
    "diff_ci_low_boot",
    "diff_ci_high_boot",
    "p_boot",
    "p_boot_holm",
    "nonzero_videos",
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
    """CSV of the tests (module docstring): ``metric`` (rank, nDCG or mAP), ``mean_a``,
    ``mean_b`` (mean rank; nDCG/mAP in percent), ``diff`` A - B; ``*_runs`` runs x videos
    (the crossed random effects test over all runs of each row; ``se``, ``df`` and its
    interval), ``*_boot`` the two-level bootstrap, ``*_video`` per video (the difference
    averaged per video over the shared seeds, paired by video; the interval a cluster
    bootstrap over videos), ``*_caption`` per caption (t2v only; empty for v2t), ``*_holm``
    Holm-adjusted over the table, ``*_mdr_across_seeds`` per-seed MdR paired by seed."""
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
