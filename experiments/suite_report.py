"""The report of a suite after its runs: rows (and rank-fusion rows), tables, tests, plots."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import torch

from rudder.data.lookup import resolve_dataset
from rudder.errors import RunError
from rudder.evaluation.loading import load_run
from rudder.evaluation.selection import reported_value
from rudder.runs.folders import cpu_model, environment_record
from rudder.runs.layout import (
    env_file,
    predictions_file,
    read_config,
    read_metrics,
    read_predictions,
)

from . import plots, tables
from .collect import EvalSplits, RowResult, fuse_seed, load_row, saved_test
from .jobs import Job, run_timing
from .suites import BEST, Suite

HARD_NEGATIVE_DRAWS = 10
POOLED_SEED = -1  # the "seed" of a fusion of every seed pooled into one model


def collect_rows(
    suite: Suite, jobs: list[Job], runs_dir: Path, splits: EvalSplits
) -> tuple[dict[str, RowResult], dict[str, list[Path]]]:
    """Every row of the suite, then one row per rank-fusion method; and, per row, the trained
    runs behind it (a fusion row: all its members' runs)."""
    by_label: dict[str, list[Job]] = {}
    for job in jobs:
        by_label.setdefault(job.row.label, []).append(job)
    rows = {
        label: load_row(label, [(j.seed, j.run_dir, j.run_dir) for j in group], splits)
        for label, group in by_label.items()
    }
    behind = {label: [j.run_dir for j in group] for label, group in by_label.items()}
    for fusion in suite.fusions:
        members = [by_label[m] for m in fusion.members]
        key = " ".join(g[0].run_dir.parent.name for g in members)
        key = hashlib.sha256(key.encode()).hexdigest()[:8]
        if fusion.pool_seeds:  # one fused model of every run of every member
            groups = [(POOLED_SEED, [j.run_dir for g in members for j in g], "pooled")]
        else:  # one fused model per seed
            groups = [(job.seed, [g[i].run_dir for g in members], f"seed-{job.seed}")
                      for i, job in enumerate(members[0])]
        for method in fusion.methods:
            folder = Path(runs_dir) / "fusion" / f"{method}-q{fusion.hybrid_q}-{key}"
            triples = [
                (seed, fuse_seed(dirs, method, fusion.hybrid_q, folder / name, splits), dirs[0])
                for seed, dirs, name in groups
            ]
            label = fusion.label(method)
            rows[label] = load_row(label, triples, splits)
            behind[label] = [d for _, dirs, _ in groups for d in dirs]
    return rows, behind


def validation_score(row: RowResult, selection: str) -> float:
    """Mean over the row's seeds of the best validation ``selection`` score each run recorded
    (``metrics.json``'s ``selection``, as the trainer chose its best.pt); higher is better."""
    scores = []
    for run_dir in row.run_dirs:
        recorded = read_metrics(run_dir).get("selection") or {}
        if selection not in recorded:
            raise RunError(f"{run_dir}: metrics.json records no validation {selection}")
        scores.append(reported_value(float(recorded[selection]), selection))
    return float(np.mean(scores))


def best_row(suite: Suite, rows: dict[str, RowResult], selection: str) -> str | None:
    """The row of ``best_of`` with the best mean *validation* ``selection`` score over seeds
    (:func:`validation_score`); the test split plays no part in the choice."""
    if not suite.best_of:
        return None
    score = {label: validation_score(rows[label], selection) for label in suite.best_of}
    return max(suite.best_of, key=lambda label: score[label])


def runs_at_epoch_cap(run_dirs: list[Path]) -> int:
    """How many of the runs trained up to their epoch cap (``epochs_run`` >= the config's
    ``epochs``) instead of being ended by early stopping."""
    count = 0
    for run_dir in dict.fromkeys(run_dirs):
        metrics = read_metrics(run_dir)
        if int(metrics.get("epochs_run", 0)) >= int(read_config(run_dir)["epochs"]):
            count += 1
    return count


def header(suite: Suite, jobs: list[Job], command: str, best: str | None, selection: str,
           at_cap: int = 0, rows: dict | None = None) -> str:
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
        ("Evaluation protocol", suite.protocol.describe()),
        ("Training relevance", _training_relevance(jobs)),
        (
            "Convergence",
            (
                f"{at_cap} of {len(unique)} runs stopped at the epoch cap (0 expected: early "
                "stopping ends every run; the CSV's runs_at_epoch_cap per row)"
            ),
        ),
        ("Hyper-parameters", _settings_text(suite, jobs)),
        ("Fusion", _fusion_text(suite, rows or {})),
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
                f"Best of {', '.join(suite.best_of)} (highest mean *validation* `{selection}` "
                f"of the selected checkpoints; the test split plays no part): **{best}**."
            ),
        ]
    return "\n".join(lines) + "\n"


def _training_relevance(jobs: list[Job]) -> str:
    """Which relevance each row's loss trains on (only losses that read relevance)."""
    from rudder import losses

    by_kind: dict[str, list[str]] = {}
    for job in jobs:
        if "relevance" not in (*losses.loss_class(job.config.loss.name).requires,
                                *losses.loss_class(job.config.loss.name).optional):
            continue
        sup = job.config.supervision
        kind = ("R(caption, the video's batch caption)" if sup.batch_relevance == "caption"
                else f"video-level R(v, q) of the rho {sup.rho:g} class sets")
        if sup.positive_sampling == "relevant":
            kind += f", positives drawn among captions with R > {sup.positive_threshold:g}"
        names = by_kind.setdefault(kind, [])
        if job.row.label not in names:
            names.append(job.row.label)
    return "; ".join(f"{', '.join(labels)}: {kind}" for kind, labels in by_kind.items())


def _fusion_text(suite: Suite, rows: dict) -> str:
    """Which runs each fusion fuses (Q models, Q' of Hybrid)."""
    parts = []
    for fusion in suite.fusions:
        seeds = len(rows[fusion.members[0]].seeds) if fusion.members[0] in rows else 0
        q = len(fusion.members) * (seeds if fusion.pool_seeds else 1)
        how = ("every seed pooled into one fused model" if fusion.pool_seeds
               else "one fused model per seed")
        kind = "mixed losses" if fusion.mixed_losses else "one loss"
        parts.append(f"{', '.join(fusion.methods).upper()} of {', '.join(fusion.members)} "
                     f"({kind}; {how}: Q = {q} models, Hybrid Q' = {fusion.hybrid_q})")
    return "; ".join(parts)


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


def fusion_commits(dirs: list[Path]) -> str:
    """The training commits of a fusion's member runs, in order of first appearance."""
    commits = []
    for run_dir in dirs:
        try:
            commit = _short(json.loads(env_file(run_dir).read_text()))
        except (OSError, ValueError):
            commit = "unknown"
        if commit not in commits:
            commits.append(commit)
    return " ".join(commits)


def run_records(suite: Suite, rows: dict[str, RowResult], behind: dict[str, list[Path]]
                ) -> dict[str, list[dict]]:
    """Per row, per run (in the row's order): its run key and training commit (a fusion's
    model: its folder and its members' commits)."""
    records = {}
    for label, row in rows.items():
        if label in suite.labels:
            records[label] = [{"key": f"{d.parent.name}/{d.name}",
                               "commit": fusion_commits([d])} for d in row.run_dirs]
        else:
            records[label] = [{"key": f"{d.parent.name}/{d.name}",
                               "commit": fusion_commits(read_metrics(d).get("members") and
                                                        [Path(m) for m in
                                                         read_metrics(d)["members"]] or [])}
                              for d in row.run_dirs]
    return records


def relevance_reach(job: Job, tau: float) -> float:
    """The share of a training batch's caption-video pairs of different videos whose training
    relevance reaches ``tau``, in expectation: a caption of video v drawn uniformly, a video
    j != v, and with ``batch_relevance: caption`` one of j's captions drawn uniformly (the
    trainer's batches: random videos, one random caption each, ``positive_sampling: own``)."""
    from rudder.data.loader import build_class_index, load_split
    from rudder.supervision import relevance

    run = load_run(job.run_dir)
    cfg = run.config
    train = load_split(run.dataset, "train", run.experts, run.vocab, cfg.data.caption_langs,
                       build_class_index(run.dataset), cfg.data.max_words, cfg.data.max_frames)
    if train.nouns is None or train.verbs is None:
        raise ValueError(f"{job.run_dir}: the relevance reach needs the dataset's "
                         "noun_classes/verb_classes columns")
    mask = train.caption_mask
    owner = torch.nonzero(mask)[:, 0]
    weight = 1.0 / mask.sum(1).float()  # a caption's chance to be its video's batch caption
    nouns, verbs = train.nouns[mask].float(), train.verbs[mask].float()
    if cfg.supervision.batch_relevance == "video":
        reach = (relevance(nouns, verbs, *train.video_classes(cfg.supervision.rho)) >= tau)
        reach = reach.float()  # (captions, videos)
    else:
        pairs = (relevance(nouns, verbs, nouns, verbs) >= tau).float()  # caption x caption
        reach = torch.zeros(len(owner), train.num_videos)
        reach.index_add_(1, owner, pairs * weight[owner])  # mean over j's captions
    reach[torch.arange(len(owner)), owner] = 0.0
    per_video = torch.zeros(train.num_videos).index_add_(0, owner, reach.sum(1) * weight[owner])
    return float(per_video.sum() / (train.num_videos * (train.num_videos - 1)))


def relevance_reach_notes(suite: Suite, jobs: list[Job]) -> list[str]:
    """For each row whose loss has a relevance threshold ``tau``: how many in-batch pairs of
    different videos reach it in training (:func:`relevance_reach`)."""
    lines = []
    for row in suite.rows:
        job = next(j for j in jobs if j.row is row)
        tau = job.config.loss.params.get("tau")
        if tau is None:
            continue
        share = relevance_reach(job, float(tau))
        lines.append(
            f"{row.label}: {100 * share:.2g}% of the training batches' caption-video pairs of "
            f"different videos reach the relevance threshold tau = {tau:g} "
            f"(`{job.config.supervision.batch_relevance}` relevance)"
            + (". Below 1%, the loss's relevant set is empty for almost every anchor: its "
               "negatives are HN's (every other video), and RANP's positive term compares the "
               "hardest negative with 1." if share < 0.01 else ".")
        )
    return lines


def write_report(
    suite: Suite, jobs: list[Job], output: Path, command: str, runs_dir: Path
) -> list[Path]:
    """Write ``<output>/<suite>-ranks.npz`` (:mod:`experiments.archive`), the tables and tests
    recomputed from it (``<suite>.md``, ``.csv``, ``-tests.csv``: :mod:`experiments.report`),
    and the plots ``-recall.png`` and ``-hardneg.png``; returns their paths."""
    from . import report
    from .archive import archive_path, write_archive

    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    splits = EvalSplits(own_video=suite.protocol.relevance == "own_video")
    rows, behind = collect_rows(suite, jobs, runs_dir, splits)
    reference = suite.protocol.relevance == "reference"
    for row in rows.values():
        tables.check_against_metrics(row, scores=reference)
    selection = jobs[0].config.selection
    best = best_row(suite, rows, selection)
    at_cap = {label: runs_at_epoch_cap(dirs) for label, dirs in behind.items()}
    capped = runs_at_epoch_cap([j.run_dir for j in jobs])
    notes = [f"Fusion rows: {_fusion_text(suite, rows)}."] if suite.fusions else []
    notes += relevance_reach_notes(suite, jobs)
    meta = {
        "suite": suite.name,
        "rows": list(rows),
        "comparisons": [[best if a == BEST else a, best if b == BEST else b]
                        for a, b in suite.comparisons],
        "best": best,
        "test_metrics": list(suite.test_metrics),
        "header": header(suite, jobs, command, best, selection, capped, rows),
        "notes": notes,
        "runs_at_epoch_cap": at_cap,
    }
    fingerprint = resolve_dataset(jobs[0].config.data.dataset).fingerprint()
    written = [write_archive(archive_path(output, suite.name), rows,
                             run_records(suite, rows, behind), fingerprint, meta)]
    written += report.write(suite.name, output)
    stem = output / suite.name
    written.append(
        plots.recall_curves(
            list(rows.values()), stem.with_name(f"{suite.name}-recall.png"), suite.title
        )
    )
    values, baseline = hard_negatives(suite, jobs, splits)
    if values and baseline is not None:  # a baseline comes with the first row's values
        written.append(
            plots.hard_negative_histograms(
                values, baseline, stem.with_name(f"{suite.name}-hardneg.png")
            )
        )
    return written
