"""``python -m experiments.tune SUITE``: choose each row's hyper-parameters on the validation
split, with the same budget for every loss, and write them for ``experiments.run``.

The suite's ``tune`` section (inline in ``suite.yaml`` or a YAML file it names)::

    trials: 8        # trials per row: the same budget for every loss
    epochs: 8        # each trial is a short training run with this many epochs
    seed: 0          # training seed of the trials and seed of the grid subsampling
    edge_steps: 3    # at most this many grid extensions per key (below)
    shared:          # settings every loss reads: the same candidates for every row
      optim.lr: [0.00025, 0.0005, 0.001, 0.002]
    grids:           # per loss name: dotted config keys -> candidate values (their product)
      mm: {loss.params.margin: [0.05, 0.1, 0.2, 0.4]}
      po: {loss.params.m1: [...], supervision.alpha_n: [...], ...}

For each row, the shared grid plus the grid of its loss (a loss grid may not list a shared
key: every row of a suite is offered the same shared settings), minus the keys the row's
YAML sets itself (a row *pins* a setting by writing it, e.g. RANP's tau in the tau ablation
rows), minus the points the loss rejects (PO's ``p < m1 < m2 < n``), is the candidate set.
The row's own settings (the defaults) are always a trial when the grid holds them, so
tuning never loses to the defaults on validation; the other trials are drawn without
replacement (a generator seeded by ``seed`` and the loss name, so rows of one loss try the
same points). A grid with fewer valid points than ``trials`` is an error: every row gets
exactly ``trials`` grid trials. Each trial trains the row with the point's settings for
``epochs`` epochs and scores its best validation evaluation (``metrics.jsonl``) by the row's
``selection``, chosen as the trainer chooses ``best.pt``
(:func:`rudder.evaluation.selection.improves`); the test split is never evaluated. The best
trial wins (ties: the earlier trial in grid order); the file shows each trial's value of the
criterion.

A choice at a grid edge extends the grid: while the best trial's value of a numeric key is
the smallest or largest value tried for that key, one more trial moves that key one step
further out from the best point (:func:`next_value`: the ratio of the two outermost values
when all are positive, else their difference), every such key in one round, until no choice
sits at an edge, the loss rejects the next value (a bound, e.g. tau <= 1), or ``edge_steps``
extensions of the key were made. Extension trials are part of the row's budget report
(``extensions`` in the tuned file); a key whose choice stays at an edge is listed under
``at_edge`` with the reason.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from rudder.atomic import atomic_write_text
from rudder.config import ConfigError, to_dict
from rudder.data.layout import LayoutError
from rudder.data.lookup import resolve_dataset
from rudder.errors import RunError, one_line
from rudder.evaluation.selection import improves, reported_value, selection_key, selection_score
from rudder.losses import LossConfigError
from rudder.losses import defaults as loss_defaults
from rudder.optional import MissingExtra, check_installed, config_needs
from rudder.runs.folders import prepare_run_dir
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
_SPEC_KEYS = {"trials", "epochs", "seed", "grids", "shared", "edge_steps"}
DEFAULT_EDGE_STEPS = 3


@dataclass(frozen=True)
class TuneSpec:
    trials: int
    epochs: int
    seed: int
    grids: dict[str, dict[str, list]]
    shared: dict[str, list] = field(default_factory=dict)
    edge_steps: int = DEFAULT_EDGE_STEPS

    def grid(self, loss: str) -> dict[str, list]:
        """The shared settings' candidates, then the loss's own (module docstring)."""
        return {**self.shared, **self.grids[loss]}


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
    numbers["edge_steps"] = spec.get("edge_steps", DEFAULT_EDGE_STEPS)
    if any(not isinstance(v, int) or isinstance(v, bool) or v < (k in ("trials", "epochs"))
           for k, v in numbers.items()):
        raise SuiteError(
            f"{where}: trials and epochs must be positive integers, seed and edge_steps "
            f"integers >= 0; got {numbers}"
        )
    grids, shared = spec["grids"], spec.get("shared") or {}

    def is_grid(g) -> bool:
        return isinstance(g, dict) and all(isinstance(v, list) and v for v in g.values())

    if not isinstance(grids, dict) or not all(is_grid(g) and g for g in grids.values()):
        raise SuiteError(f"{where}.grids must map loss names to {{dotted.key: [values, ...]}}")
    if not is_grid(shared):
        raise SuiteError(f"{where}.shared must map dotted keys to [values, ...]")
    twice = sorted({f"{loss}: {key}" for loss, grid in grids.items() for key in grid
                    if key in shared})
    if twice:
        raise SuiteError(
            f"{where}.grids list shared key(s) ({', '.join(twice)}): every row of a suite gets "
            "the same candidates of a shared setting; remove them from the loss grids"
        )
    fixed = sorted(loss for loss, grid in {**grids, "shared": shared}.items()
                   if "supervision.rho" in grid)
    if fixed:
        raise SuiteError(
            f"{where}.grids of {fixed} hold supervision.rho, which the suite's evaluation "
            "protocol fixes (evaluation.rho in suite.yaml): tuning it would tune the metric; "
            "remove it from the grids"
        )
    return TuneSpec(numbers["trials"], numbers["epochs"], numbers["seed"], grids, shared,
                    numbers["edge_steps"])


def _explicit(data: dict, key: str) -> bool:
    node = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def row_grid(row: Row, spec: TuneSpec) -> dict[str, list]:
    """The row's grid: shared and loss keys, less the keys its YAML pins."""
    loss = row_config(row).loss.name
    if loss not in spec.grids:
        raise SuiteError(f"tune.grids has no grid for loss {loss!r} (row {row.label!r})")
    return {k: v for k, v in spec.grid(loss).items() if not _explicit(row.data, k)}


def candidates(row: Row, spec: TuneSpec) -> list[dict]:
    """The row's trial settings (dotted key -> value), ``spec.trials`` of them (see module)."""
    loss = row_config(row).loss.name
    grid = row_grid(row, spec)
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
        node: Any = tree
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
    """Per row label: its base run key, the trials as (settings, :class:`Job`), and a function
    making the :class:`Job` of any other settings (the grid extensions)."""
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

        def job_for(settings: dict, row: Row = row, fingerprint: str = fingerprint) -> Job:
            key = run_key(row_data(row, dataset, spec.epochs, settings), fingerprint)
            config = row_config(row, dataset, spec.epochs, spec.seed, settings)
            return Job(row, spec.seed, config, Path(runs_dir) / "tune" / key / f"seed-{spec.seed}")

        trials = [(settings, job_for(settings)) for settings in candidates(row, spec)]
        plans[row.label] = (run_key(row_data(row, dataset), fingerprint), trials, job_for)
    return plans


def next_value(values: list[float], up: bool) -> float:
    """The value one step beyond the largest (``up``) or smallest of ``values`` (sorted, at
    least two): the ratio of the two outermost values when all are positive (a geometric
    grid: 0.05, 0.1, 0.2, 0.4 -> 0.8), else their difference; 10 significant digits."""
    a, b = (values[-2], values[-1]) if up else (values[1], values[0])
    value = b * (b / a) if min(values) > 0 else b + (b - a)
    return float(f"{value:.10g}")


def _numeric(values: list) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def extend_at_edges(row: Row, spec: TuneSpec, scored: list[tuple[dict, float]], train,
                    log=print) -> tuple[list[tuple[dict, float]], dict[str, str]]:
    """Extend the row's grid while its best trial sits at an edge (module docstring).

    ``scored``: the row's (settings, validation score) trials; ``train(settings)`` trains one
    more trial and returns its score. Returns every trial, the extensions appended, and the
    keys whose choice stays at an edge, with the reason."""
    grid = {key: sorted(set(values)) for key, values in row_grid(row, spec).items()
            if _numeric(values) and len(set(values)) > 1}
    steps = dict.fromkeys(grid, 0)
    scored = list(scored)
    while True:
        best = scored[best_trial(scored)][0]
        new, at_edge = [], {}
        for key, values in grid.items():
            if best[key] not in (values[0], values[-1]):
                continue
            if steps[key] >= spec.edge_steps:
                at_edge[key] = f"{key} = {best[key]}: the grid was extended {steps[key]} time(s)"
                continue
            value = next_value(values, up=best[key] == values[-1])
            point = {**best, key: value}
            error = _loss_error(row, point)
            if error is not None:
                at_edge[key] = f"{key} = {best[key]}: the next value {value} is invalid ({error})"
                continue
            new.append((key, point))
        if not new:
            return scored, at_edge
        for key, point in new:
            grid[key] = sorted([*grid[key], point[key]])
            steps[key] += 1
            log(f"  {row.label}: the best {key} {best[key]} is at the grid's edge; trying "
                f"{point[key]}")
            scored.append((point, train(point)))


def trial_status(job: Job) -> str:
    """``stale`` (see :meth:`Job.changes`), ``done`` (trial.json written), ``resume`` or ``new``."""
    status = job.status  # a trial never has the test predictions of the runner's "done"
    if status != "stale" and (job.run_dir / TRIAL_FILE).is_file():
        return "done"
    return status


def fit_without_test(config, run_dir: Path, resume: bool = False, overwrite: bool = False) -> None:
    """:func:`rudder.train.run` without its test step: train and select on validation only."""
    from rudder.devices import pick_device
    from rudder.train import _log_to
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
    """``results``: per row label, (base run key, [(settings, score)], number of grid trials
    before the extensions, {key: why its choice stays at an edge})."""
    rows = {}
    selection = row_config(suite.rows[0]).selection
    for label, (base_key, trials, initial, at_edge) in results.items():
        best = best_trial(trials)
        rows[label] = {
            "row_key": base_key,
            "chosen": dict(trials[best][0]),  # a copy: no YAML anchor in the file
            "validation": round(reported_value(trials[best][1], selection), 4),
            "extensions": len(trials) - initial,
            "at_edge": dict(at_edge),
            "trials": [{"settings": s, "validation": round(reported_value(v, selection), 4),
                        **({"extension": True} if i >= initial else {})}
                       for i, (s, v) in enumerate(trials)],
        }
    document = {
        "suite": suite.name,
        "command": command,
        "selected_on": "validation",
        "selection": selection,
        "budget": {"trials": spec.trials, "epochs": spec.epochs, "seed": spec.seed,
                   "edge_steps": spec.edge_steps},
        "shared": {key: list(values) for key, values in spec.shared.items()},
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
    total = sum(len(plan[1]) for plan in plans.values())
    print(f"tune {suite.name}: {len(plans)} rows x {spec.trials} trials of {spec.epochs} epochs "
          "(and a trial per key whose choice sits at a grid edge)")
    for label, (_, trials, _) in plans.items():
        for settings, job in trials:
            print(f"  [{trial_status(job):6}] {label:20} {json.dumps(settings)}  {job.run_dir}")
    stale = [job for plan in plans.values() for _, job in plan[1] if trial_status(job) == "stale"]
    if stale:
        print(
            f"error: stale trial(s), delete them: {', '.join(str(j.run_dir) for j in stale)}",
            file=sys.stderr,
        )
        return 2
    if args.dry_run:
        return 0
    try:  # every optional package the trials train with, before the first trial
        check_installed(need for plan in plans.values() for _, job in plan[1]
                        for need in config_needs(job.config))
    except MissingExtra as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    results, done = {}, 0
    for label, (base_key, trials, job_for) in plans.items():
        scored = []
        try:
            for settings, job in trials:
                done += 1
                print(f"[{done}/{total}] {label} {json.dumps(settings)}", flush=True)
                scored.append((settings, run_trial(job)))
            scored, at_edge = extend_at_edges(
                trials[0][1].row, spec, scored,
                lambda settings, job_for=job_for: run_trial(job_for(settings)))
        except (ConfigError, RunError, LayoutError, LossConfigError) as error:
            print(f"error: {trials[0][1].row.path}: {error}", file=sys.stderr)
            return 2
        results[label] = (base_key, scored, len(trials), at_edge)
    path = tuned_path(args.output, suite.name)
    command = "python -m experiments.tune " + " ".join(shlex.quote(a) for a in argv)
    write_tuned(path, suite, spec, results, command)
    for label, (_, scored, _, at_edge) in results.items():
        best = best_trial(scored)
        print(f"  {label:20} {json.dumps(scored[best][0])}  validation {scored[best][1]:.2f}")
        for reason in at_edge.values():
            print(f"  {'':20} at a grid edge: {reason}")
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
