"""``python -m experiments.tune SUITE``: choose each row's hyper-parameters on the validation
split, with the same budget for every loss, and write them for ``experiments.run``.

The suite's ``tune`` section (inline in ``suite.yaml`` or a YAML file it names)::

    trials: 8        # trials per row: the same budget for every loss
    epochs: 8        # each trial is a short training run with this many epochs
    seed: 0          # training seed of the trials and seed of the grid subsampling
    grids:           # per loss name: dotted config keys -> candidate values (their product)
      mm: {loss.params.margin: [0.05, 0.1, 0.2, 0.4], optim.lr: [0.0005, 0.001]}
      po: {loss.params.m1: [...], supervision.alpha_n: [...], ...}

For each row, the grid of its loss minus the keys the row's YAML sets itself (a row *pins*
a setting by writing it, e.g. RANP's tau in the tau ablation rows), minus the points the loss
rejects (PO's ``p < m1 < m2 < n``), is the candidate set. The row's own settings (the
defaults) are always a trial when the grid holds them, so tuning never loses to the defaults
on validation; the other trials are drawn without replacement (a generator seeded by ``seed``
and the loss name, so rows of one loss try the same points). A grid with fewer valid points than
``trials`` is an error: every row gets exactly ``trials`` trials. Each trial trains the row
with the point's settings for ``epochs`` epochs and scores its best validation evaluation
(``metrics.jsonl``) by the row's ``selection``, chosen as the trainer chooses ``best.pt``
(:func:`rudder.evaluation.selection.improves`); the test split is never evaluated. The best trial
wins
(ties: the earlier trial in grid order); the file shows each trial's value of the criterion.
The choice goes to ``<output>/<suite>-tuned.yaml``, which ``python -m experiments.run
SUITE`` then applies.

Resumable and deterministic like the runner: trials live in
``<runs-dir>/tune/<run_key>/seed-<seed>/`` (the key hashes the trial's settings and the dataset), a
finished trial (``trial.json``) is skipped, an interrupted one resumes from ``last.pt``, and
rows shared between suites share their trials.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from rudder.atomic import atomic_write_text
from rudder.config import ConfigError, to_dict
from rudder.data.layout import LayoutError
from rudder.errors import one_line
from rudder.evaluation.selection import improves, reported_value, selection_key, selection_score
from rudder.losses import LossConfigError
from rudder.losses import defaults as loss_defaults
from rudder.optional import MissingExtra, check_installed, config_needs
from rudder.runs.folders import RunError, prepare_run_dir, resolve_dataset
from rudder.runs.layout import log_file, read_history, read_json

from .jobs import Job, train_job
from .suite_cli import suite_parser
from .suites import (
    Row,
    Suite,
    SuiteError,
    load_suite,
    row_config,
    row_data,
    run_key,
)

TRIAL_FILE = "trial.json"
_SPEC_KEYS = {"trials", "epochs", "seed", "grids"}


@dataclass(frozen=True)
class TuneSpec:
    trials: int
    epochs: int
    seed: int
    grids: dict[str, dict[str, list]]


def tune_spec(suite: Suite) -> TuneSpec:
    """The suite's checked ``tune`` section."""
    spec, where = suite.tune, f"{suite.folder / 'suite.yaml'}: tune"
    if spec is None:
        raise SuiteError(f"suite {suite.name!r} declares no tune section; nothing to tune")
    unknown = sorted(set(spec) - _SPEC_KEYS)
    if unknown or not {"trials", "epochs", "grids"} <= set(spec):
        raise SuiteError(
            f"{where} needs keys trials, epochs, grids (and optional seed); got {sorted(spec)}"
        )
    numbers = {k: spec.get(k, 0) for k in ("trials", "epochs", "seed")}
    if any(not isinstance(v, int) or v < (k != "seed") for k, v in numbers.items()):
        raise SuiteError(
            f"{where}: trials and epochs must be positive integers, seed >= 0; got {numbers}"
        )
    grids = spec["grids"]
    if not isinstance(grids, dict) or not all(
        isinstance(g, dict) and g and all(isinstance(v, list) and v for v in g.values())
        for g in grids.values()
    ):
        raise SuiteError(f"{where}.grids must map loss names to {{dotted.key: [values, ...]}}")
    fixed = sorted(loss for loss, grid in grids.items() if "supervision.rho" in grid)
    if fixed:
        raise SuiteError(
            f"{where}.grids of {fixed} hold supervision.rho, which the suite's evaluation "
            "protocol fixes (evaluation.rho in suite.yaml): tuning it would tune the metric; "
            "remove it from the grids"
        )
    return TuneSpec(numbers["trials"], numbers["epochs"], numbers["seed"], grids)


def _explicit(data: dict, key: str) -> bool:
    node = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def candidates(row: Row, spec: TuneSpec) -> list[dict]:
    """The row's trial settings (dotted key -> value), ``spec.trials`` of them (see module)."""
    loss = row_config(row).loss.name
    if loss not in spec.grids:
        raise SuiteError(f"tune.grids has no grid for loss {loss!r} (row {row.label!r})")
    grid = {k: v for k, v in spec.grids[loss].items() if not _explicit(row.data, k)}
    points = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
    errors = [_loss_error(row, p) for p in points]
    valid = [p for p, error in zip(points, errors, strict=False) if error is None]
    if len(valid) < spec.trials:
        example = next((f" (e.g. {e})" for e in errors if e), "")
        raise SuiteError(
            f"row {row.label!r}: the {loss!r} grid has {len(valid)} valid point(s) once the row's "
            f"own settings are pinned, fewer than tune.trials={spec.trials}{example}"
        )
    points = valid
    current = row_settings(row, list(grid))
    first = [i for i, p in enumerate(points) if p == current][:1]
    others = [i for i in range(len(points)) if i not in first]
    rng = np.random.default_rng([spec.seed, zlib.crc32(loss.encode())])
    drawn = rng.choice(len(others), spec.trials - len(first), replace=False)
    return [points[i] for i in first + sorted(others[k] for k in drawn)]


def row_settings(row: Row, keys: list[str]) -> dict:
    """The row's own value of each dotted key (its YAML, else the config or loss default)."""
    config = row_config(row)
    tree = to_dict(config)
    tree["loss"]["params"] = {**loss_defaults(config.loss.name), **config.loss.params}
    values = {}
    for key in keys:
        node = tree
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        values[key] = node
    return values


def _loss_error(row: Row, settings: dict) -> str | None:
    """Why the row's config rejects ``settings`` (e.g. PO's p < m1 < m2 < n: validating a
    config builds its loss), or None."""
    try:
        row_config(row, settings=settings)
    except SuiteError as error:
        return str(error)
    return None


def trial_jobs(suite: Suite, spec: TuneSpec, runs_dir: Path, dataset: str | None) -> dict:
    """Per row label: its base run key and the trials as (settings, :class:`Job`)."""
    if suite.requires_dataset and dataset is None:
        raise SuiteError(f"suite {suite.name!r} needs --dataset DIR: {suite.requires_dataset}")
    plans, fingerprints = {}, {}
    for row in suite.rows:
        spec_name = row_config(row, dataset).data.dataset
        if spec_name not in fingerprints:
            fingerprints[spec_name] = resolve_dataset(spec_name).fingerprint()
        fingerprint = fingerprints[spec_name]
        base = row_config(row, dataset)
        if base.data.val_split != "validation":
            raise SuiteError(
                f"{row.path}: data.val_split is {base.data.val_split!r}; tuning selects on the "
                "validation split only, so this row cannot be tuned"
            )
        trials = []
        for settings in candidates(row, spec):
            key = run_key(row_data(row, dataset, spec.epochs, settings), fingerprint)
            config = row_config(row, dataset, spec.epochs, spec.seed, settings)
            run_dir = Path(runs_dir) / "tune" / key / f"seed-{spec.seed}"
            trials.append((settings, Job(row, spec.seed, config, run_dir)))
        plans[row.label] = (run_key(row_data(row, dataset), fingerprint), trials)
    return plans


def trial_status(job: Job) -> str:
    """``stale`` (see :meth:`Job.changes`), ``done`` (trial.json written), ``resume`` or ``new``."""
    status = job.status  # a trial never has the test predictions of the runner's "done"
    if status != "stale" and (job.run_dir / TRIAL_FILE).is_file():
        return "done"
    return status


def fit_without_test(config, run_dir: Path, resume: bool = False, overwrite: bool = False) -> None:
    """:func:`rudder.train.run` without its test step: train and select on validation only."""
    from rudder.train import _log_to
    from rudder.training.devices import pick_device
    from rudder.training.distributed import init_distributed, shutdown
    from rudder.training.trainer import Trainer

    ctx = init_distributed(pick_device(config.device))
    try:
        prepare_run_dir(run_dir, resume, overwrite)
        _log_to(log_file(run_dir))
        Trainer(config, run_dir, ctx, resume=resume).fit()
    finally:
        shutdown(ctx)


def best_trial(scored: list[tuple[dict, float]]) -> int:
    """Index of the highest validation score; the earliest one among equal scores."""
    return max(range(len(scored)), key=lambda i: (scored[i][1], -i))


def run_trial(job: Job) -> float:
    """Train one trial without testing; returns its best validation selection score."""
    path = job.run_dir / TRIAL_FILE
    if not path.is_file():
        train_job(job, fit_without_test)
        evals = read_history(job.run_dir)
        if not evals or any(e["split"] != "validation" for e in evals):
            raise RunError(f"{job.run_dir}: expected validation evaluations in its history")
        selection = job.config.selection
        best = evals[0]
        for evaluation in evals[1:]:  # the trainer's rule: its best.pt is this epoch
            if improves(selection_key(evaluation, selection), selection_key(best, selection)):
                best = evaluation
        summary = {"validation": selection_score(best, selection), "best_epoch": best["epoch"]}
        atomic_write_text(path, json.dumps(summary, indent=2))
    return read_json(path)["validation"]


def tuned_path(output: Path, suite: str) -> Path:
    return Path(output) / f"{suite}-tuned.yaml"


def write_tuned(path: Path, suite: Suite, spec: TuneSpec, results: dict, command: str) -> None:
    rows = {}
    selection = row_config(suite.rows[0]).selection
    for label, (base_key, trials) in results.items():
        best = best_trial(trials)
        rows[label] = {
            "row_key": base_key,
            "chosen": dict(trials[best][0]),  # a copy: no YAML anchor in the file
            "validation": round(reported_value(trials[best][1], selection), 4),
            "trials": [{"settings": s, "validation": round(reported_value(v, selection), 4)}
                       for s, v in trials],
        }
    document = {
        "suite": suite.name,
        "command": command,
        "selected_on": "validation",
        "selection": selection,
        "budget": {"trials": spec.trials, "epochs": spec.epochs, "seed": spec.seed},
        "rows": rows,
    }
    header = (
        f"# Hyper-parameters chosen on the validation split by `{command}`.\n"
        "# Read by `python -m experiments.run`; row_key ties each choice to the row's YAML and\n"
        "# the dataset (a changed row or dataset makes the file stale).\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True))


def load_tuned(path: Path, suite: Suite, base_keys: dict[str, str]) -> dict[str, dict]:
    """Per row label, the chosen settings from a tuned file, checked against the rows now
    (``base_keys``: label -> the row's run key without the tuned settings)."""
    if not Path(path).is_file():
        raise SuiteError(
            f"suite {suite.name!r} is tuned on validation but {path} does not exist: run "
            f"`python -m experiments.tune {suite.name}` first, or pass --untuned for the defaults"
        )
    try:
        document = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise SuiteError(f"{path}: not a readable tuned-settings YAML file ({one_line(error)}); "
                         "run experiments.tune again, or pass --untuned") from None
    rows = document.get("rows") if isinstance(document, dict) else None
    if not isinstance(rows, dict) or not all(
        isinstance(r, dict) and isinstance(r.get("chosen"), dict) for r in rows.values()
    ):
        raise SuiteError(f"{path}: not a file of experiments.tune (expected 'rows: {{label: "
                         "{row_key: ..., chosen: {...}}}}'); run experiments.tune again, or "
                         "pass --untuned")
    chosen = {}
    for label, key in base_keys.items():
        if label not in rows:
            raise SuiteError(
                f"{path}: no tuned settings for row {label!r}; run experiments.tune again"
            )
        if rows[label].get("row_key") != key:
            raise SuiteError(
                f"{path}: row {label!r} was tuned on another row YAML or dataset "
                f"({rows[label].get('row_key')} vs {key} now); run experiments.tune again"
            )
        chosen[label] = rows[label]["chosen"]
    return chosen


def build_parser() -> argparse.ArgumentParser:
    return suite_parser(
        f"python -m {__package__}.tune",
        "Choose each row's hyper-parameters on the validation split (same number of short "
        "trials per loss) and write <output>/<suite>-tuned.yaml for experiments.run.",
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        suite = load_suite(args.suite, args.suites_dir)
        spec = tune_spec(suite)
        plans = trial_jobs(suite, spec, args.runs_dir, args.dataset)
    except (SuiteError, ConfigError, RunError, LayoutError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    total = sum(len(trials) for _, trials in plans.values())
    print(f"tune {suite.name}: {len(plans)} rows x {spec.trials} trials of {spec.epochs} epochs")
    for label, (_, trials) in plans.items():
        for settings, job in trials:
            print(f"  [{trial_status(job):6}] {label:20} {json.dumps(settings)}  {job.run_dir}")
    stale = [
        job for _, trials in plans.values() for _, job in trials if trial_status(job) == "stale"
    ]
    if stale:
        print(
            f"error: stale trial(s), delete them: {', '.join(str(j.run_dir) for j in stale)}",
            file=sys.stderr,
        )
        return 2
    if args.dry_run:
        return 0
    try:  # every optional package the trials train with, before the first trial
        check_installed(need for _, trials in plans.values() for _, job in trials
                        for need in config_needs(job.config))
    except MissingExtra as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    results, done = {}, 0
    for label, (base_key, trials) in plans.items():
        scored = []
        for settings, job in trials:
            done += 1
            print(f"[{done}/{total}] {label} {json.dumps(settings)}", flush=True)
            try:
                scored.append((settings, run_trial(job)))
            except (ConfigError, RunError, LayoutError, LossConfigError) as error:
                print(f"error: {job.row.path}: {error}", file=sys.stderr)
                return 2
        results[label] = (base_key, scored)
    path = tuned_path(args.output, suite.name)
    command = "python -m experiments.tune " + " ".join(shlex.quote(a) for a in argv)
    write_tuned(path, suite, spec, results, command)
    for label, (_, scored) in results.items():
        best = best_trial(scored)
        print(f"  {label:20} {json.dumps(scored[best][0])}  validation {scored[best][1]:.2f}")
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
