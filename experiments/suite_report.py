"""The report of a suite after its runs: rows (and rank-fusion rows), tables, tests, plots."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
from pathlib import Path

import numpy as np

from rudder.atomic import atomic_write_text
from rudder.run_layout import env_file, predictions_file, read_predictions
from rudder.runs import environment_record, resolve_dataset
from rudder.selection import selection_score

from . import plots, tables
from .collect import EvalSplits, RowResult, fuse_seed, load_row, saved_test
from .run import Job, run_timing
from .suites import BEST, Suite

HARD_NEGATIVE_DRAWS = 10


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (platform.processor() elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def collect_rows(
    suite: Suite, jobs: list[Job], runs_dir: Path, splits: EvalSplits
) -> dict[str, RowResult]:
    """Every row of the suite, then one row per rank-fusion method (same seeds)."""
    by_label: dict[str, list[Job]] = {}
    for job in jobs:
        by_label.setdefault(job.row.label, []).append(job)
    rows = {
        label: load_row(label, [(j.seed, j.run_dir, j.run_dir) for j in group], splits)
        for label, group in by_label.items()
    }
    if suite.fusion is None:
        return rows
    fusion = suite.fusion
    members = [by_label[m] for m in fusion.members]
    key = hashlib.sha256(" ".join(g[0].run_dir.parent.name for g in members).encode()).hexdigest()[
        :8
    ]
    for method in fusion.methods:
        folder = Path(runs_dir) / "fusion" / f"{method}-q{fusion.hybrid_q}-{key}"
        triples = []
        for i, seed_job in enumerate(members[0]):
            dirs = [g[i].run_dir for g in members]
            out = fuse_seed(
                dirs, method, fusion.hybrid_q, folder / f"seed-{seed_job.seed}", splits
            )
            triples.append((seed_job.seed, out, dirs[0]))
        label = fusion.label(method)
        rows[label] = load_row(label, triples, splits)
    return rows


def best_row(suite: Suite, rows: dict[str, RowResult], selection: str) -> str | None:
    """The row of ``best_of`` with the highest mean test ``selection`` score over seeds."""
    if not suite.best_of:
        return None
    score = {
        label: np.mean([selection_score(m, selection) for m in rows[label].metrics])
        for label in suite.best_of
    }
    return max(suite.best_of, key=lambda label: score[label])


def header(suite: Suite, jobs: list[Job], command: str, best: str | None, selection: str) -> str:
    """Provenance: command, data (and sample generator version), machine, schedule, time."""
    config = jobs[0].config
    folder = resolve_dataset(config.data.dataset)
    env = environment_record(folder.fingerprint())
    if config.data.dataset == "sample":
        from rudder.data.sample import SAMPLE_SEED, SAMPLE_VERSION

        data = (
            f"the embedded sample dataset (SIMULATED; `rudder.data.sample.SAMPLE_VERSION` = "
            f"{SAMPLE_VERSION}, seed {SAMPLE_SEED}, fingerprint {env['dataset_fingerprint']})"
        )
    else:
        data = f"`{config.data.dataset}` (fingerprint {env['dataset_fingerprint']})"
    unique = {j.run_dir: j for j in jobs}
    timings = [run_timing(j) for j in unique.values()]
    seconds = sum(t.get("seconds", 0.0) for t in timings)
    cpu = sum(t.get("cpu_seconds", 0.0) for t in timings)
    cpu_known = sum("cpu_seconds" in t for t in timings)
    seeds = sorted({j.seed for j in jobs})
    epochs = sorted({j.config.epochs for j in jobs})
    lrs = sorted({j.config.optim.lr for j in jobs})
    items = [
        ("Reproduces", suite.source),
        ("Command", f"`{command}` (from the project root)"),
        ("Data", f"{data}; test split of {len(_videos(jobs[0]))} videos"),
        (
            "Machine",
            (
                f"{cpu_model()}, {os.cpu_count()} cores (shared with other jobs); Python "
                f"{env['python']}, torch {env['packages']['torch']}"
            ),
        ),
        (
            "Code",
            f"runs trained at {training_commits(jobs)}; report written at git {_short(env)}",
        ),
        (
            "Schedule",
            (
                f"at most {', '.join(map(str, epochs))} epochs, early stopping patience "
                f"{config.patience}, model selection on the {config.data.val_split} split "
                f"`{config.selection}`, batch {config.data.batch_size}, {config.optim.name} lr "
                f"{', '.join(map(str, lrs))}; seeds "
                f"{', '.join(map(str, seeds))}"
            ),
        ),
        ("Hyper-parameters", _settings_text(suite, jobs)),
        (
            "Training time",
            (
                f"{seconds / 60:.1f} min wall-clock over {len(unique)} runs (runs shared "
                f"with other suites counted once); CPU time {cpu / 60:.1f} min over the "
                f"{cpu_known} runs that recorded it"
            ),
        ),
        ("Written", _dt.datetime.now().isoformat(timespec="seconds")),
    ]
    lines = [f"# {suite.title}", ""] + [f"- **{key}**: {value}" for key, value in items if value]
    lines += [
        "",
        (
            "Cells: mean ± std over seeds [95% paired bootstrap interval over test queries]. "
            "R@K, nDCG and mAP in percent; MdR, MnR are ranks (lower is better). "
            "See experiments/README.md."
        ),
    ]
    if best:
        lines += [
            "",
            (
                f"Best relevance loss (highest mean test `{selection}`): **{best}**, chosen on "
                "the test split, so its test against MM is optimistic."
            ),
        ]
    return "\n".join(lines) + "\n"


def training_commits(jobs: list[Job]) -> str:
    """The git commit(s) the runs were trained at (their ``env.json``); with several, each
    commit with its runs (``<run key>/seed-<s>``)."""
    by_commit: dict[str, list[str]] = {}
    for run_dir in dict.fromkeys(j.run_dir for j in jobs):
        try:
            env = json.loads(env_file(run_dir).read_text())
        except (OSError, ValueError):  # missing or unreadable: the commit is unknown
            env = {}
        by_commit.setdefault(_short(env), []).append(f"{run_dir.parent.name}/{run_dir.name}")
    if len(by_commit) == 1:
        return f"git {next(iter(by_commit))}"
    return "several commits: " + "; ".join(
        f"git {commit} ({', '.join(runs)})" for commit, runs in by_commit.items()
    )


def _short(env: dict) -> str:
    """The first 10 characters of ``env``'s git sha ("unknown" without one)."""
    return str(env.get("git_sha") or "unknown")[:10]


def _settings_text(suite: Suite, jobs: list[Job]) -> str:
    """The settings experiments.tune chose per row, or that none were tuned."""
    tuned = {j.row.label: j.settings for j in jobs if j.settings}
    if not tuned:
        return "every row at its YAML's settings (not tuned)"
    chosen = "; ".join(
        f"{label}: " + ", ".join(f"{key.split('.')[-1]} {value}" for key, value in s.items())
        for label, s in tuned.items()
    )
    where = f"all trials in `{suite.name}-tuned.yaml`"
    return f"chosen on validation by `python -m experiments.tune` ({where}): {chosen}"


def _videos(job: Job) -> np.ndarray:
    return read_predictions(predictions_file(job.run_dir, "test")).video_ids


def hard_negatives(
    suite: Suite, jobs: list[Job], splits: EvalSplits
) -> tuple[dict, np.ndarray | None]:
    """Pooled hardest-negative relevance per row (all seeds), and the random-negative baseline,
    on each run's saved test similarities (:func:`experiments.collect.saved_test`)."""
    values, baseline = {}, None
    for row in suite.rows:
        pooled = []
        for job in (j for j in jobs if j.row is row):
            pred, split, run = saved_test(job.run_dir, splits)
            if split.relevance is None:
                return {}, None
            sims, masks = pred.sims, pred.query_masks
            batch = run.config.data.batch_size
            pooled.append(
                plots.hardest_negative_relevance(
                    sims, split.relevance, masks, batch, HARD_NEGATIVE_DRAWS, seed=job.seed
                )
            )
            if baseline is None:
                baseline = plots.hardest_negative_relevance(
                    sims,
                    split.relevance,
                    masks,
                    batch,
                    HARD_NEGATIVE_DRAWS,
                    seed=0,
                    random_negative=True,
                )
        values[row.label] = np.concatenate(pooled)
    return values, baseline


def write_report(
    suite: Suite, jobs: list[Job], output: Path, command: str, runs_dir: Path
) -> list[Path]:
    """Write ``<output>/<suite>.md``, ``.csv``, ``-wilcoxon.csv``, ``-recall.png`` and
    ``-hardneg.png``; returns their paths."""
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    splits = EvalSplits()
    rows = collect_rows(suite, jobs, runs_dir, splits)
    selection = jobs[0].config.selection
    best = best_row(suite, rows, selection)
    summaries = {label: tables.summarise(row) for label, row in rows.items()}
    tests = [
        tables.compare(rows[best if a == BEST else a], rows[best if b == BEST else b])
        for a, b in suite.comparisons
    ]
    text = tables.markdown(summaries, tests, header(suite, jobs, command, best, selection))
    stem = output / suite.name
    written = [
        stem.with_suffix(".md"),
        stem.with_name(f"{suite.name}.csv"),
        stem.with_name(f"{suite.name}-wilcoxon.csv"),
    ]
    atomic_write_text(written[0], text)
    atomic_write_text(
        written[1],
        tables.metrics_csv(suite.name, summaries, {k: len(r.seeds) for k, r in rows.items()}),
    )
    atomic_write_text(written[2], tables.tests_csv(suite.name, tests))
    written.append(
        plots.recall_curves(
            list(rows.values()), stem.with_name(f"{suite.name}-recall.png"), suite.title
        )
    )
    values, baseline = hard_negatives(suite, jobs, splits)
    if values:
        written.append(
            plots.hard_negative_histograms(
                values, baseline, stem.with_name(f"{suite.name}-hardneg.png")
            )
        )
    return written
