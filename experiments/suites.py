"""Suites: one folder per paper table under ``experiments/suites/``.

A suite folder holds one rudder ``TrainConfig`` YAML per table row (each usable directly
with ``python -m rudder.train --config FILE``) and a ``suite.yaml`` that names the rows and
says what the table compares::

    title: "..."                 # the table's caption
    source: "..."                # the paper and table it reproduces
    requires_dataset: "..."      # optional: the suite needs --dataset DIR (what to build)
    rows: [{config: 01-mm.yaml, label: MM}, ...]
    comparisons: [{a: PO, b: MM}, ...]   # Wilcoxon tests; "best" = the best row of best_of
    best_of: [RAN, ...]                  # optional
    fusion: {members: [...], methods: [avg, max, hybrid], hybrid_q: 4,   # optional; or a list
             name: RANP, pool_seeds: true, mixed_losses: false}
    tune: ../tune-grids.yaml     # optional: the tuning grids (a file, or the mapping inline);
                                 # see experiments.tune
    seeds: 10                    # optional: training runs per row (seeds 0..N-1; default 5)
    test_metrics: [rank, nDCG]   # optional: what each comparison is tested on (default: rank)
    evaluation: {rho: 0.25, relevance: reference}   # the suite's one evaluation protocol

``evaluation`` (optional; these are its defaults) fixes how every row is evaluated:
``rho`` is the video class-set threshold of the relevance behind nDCG and mAP (0.25, the
RANP paper's, unless the suite says otherwise). It is written into every row's
``supervision.rho`` (so rows with ``batch_relevance: video`` train on the same class sets);
a row may not set another value, and a tuning grid may not hold it (never tuned).
``relevance`` names the relevance definition of the tables: ``reference`` (the
EPIC-KITCHENS-100 code's R of the class sets) or ``own_video`` (the same, with each
caption's own video counted fully relevant, R = 1;
:func:`rudder.evaluation.inference.relevance_matrix`).

Run directories are keyed by :func:`run_key` (the config without its seed, plus the
dataset's fingerprint), so a row that two suites share (same YAML content) is trained once.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from rudder import losses
from rudder.config import ConfigError, TrainConfig, apply_override, from_dict, load_yaml, to_dict
from rudder.errors import RudderError

SUITES_DIR = Path(__file__).resolve().parent / "suites"
SUITE_FILE = "suite.yaml"
FUSION_METHODS = ("avg", "max", "hybrid")
BEST = "best"
DEFAULT_RHO = 0.25  # the RANP paper's threshold
RELEVANCE_DEFINITIONS = ("reference", "own_video")
DEFAULT_SEEDS = 5  # training runs per row unless the suite says otherwise (at least 2: the
# run-level tests need two runs of each row)


class SuiteError(ValueError):
    """A suite that cannot be loaded or run as asked."""


@dataclass(frozen=True)
class Row:
    """One table row: its label and its TrainConfig YAML (as read)."""

    label: str
    path: Path
    data: dict


@dataclass(frozen=True)
class Fusion:
    """Rank fusion of the runs of ``members``, one table row per method.

    ``pool_seeds``: one fused model of every seed of every member (Q = members x seeds, as
    Galanopoulos & Mezaris fuse many runs of one loss family); otherwise one fused model per
    seed of the members' runs of that seed (Q = members). Members must train with one loss
    unless ``mixed_losses`` (then the rows say "mixed losses").
    """

    members: tuple[str, ...]
    methods: tuple[str, ...]
    hybrid_q: int
    name: str = ""
    pool_seeds: bool = False
    mixed_losses: bool = False

    def label(self, method: str) -> str:
        parts = [p for p in (self.name, "mixed losses" if self.mixed_losses else "") if p]
        if method == "hybrid":
            parts.append(f"Q'={self.hybrid_q}")
        return f"Fusion {method.upper()}" + (f" ({', '.join(parts)})" if parts else "")


@dataclass(frozen=True)
class Protocol:
    """The suite's evaluation protocol (see the module docstring)."""

    rho: float = DEFAULT_RHO
    relevance: str = "reference"

    def describe(self) -> str:
        definition = (
            "the reference relevance (EPIC-KITCHENS-100 code: items with R = 1 are relevant)"
            if self.relevance == "reference"
            else "each caption's own video counted fully relevant (R = 1), else the reference R"
        )
        return (
            f"nDCG and mAP at rho {self.rho:g} for every row (fixed, never tuned), {definition}"
        )


@dataclass(frozen=True)
class Suite:
    name: str
    folder: Path
    title: str
    source: str
    rows: tuple[Row, ...]
    comparisons: tuple[tuple[str, str], ...]
    best_of: tuple[str, ...] = ()
    fusions: tuple[Fusion, ...] = ()
    requires_dataset: str | None = None
    tune: dict | None = None
    protocol: Protocol = Protocol()
    seeds: int = DEFAULT_SEEDS
    test_metrics: tuple[str, ...] = ("rank",)
    labels: tuple[str, ...] = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "labels", tuple(r.label for r in self.rows))

    @property
    def fusion(self) -> Fusion | None:
        """The first fusion (None without one)."""
        return self.fusions[0] if self.fusions else None


def suite_names(root: Path = SUITES_DIR) -> list[str]:
    """The suites found under ``root`` (folders holding a ``suite.yaml``), sorted."""
    return sorted(p.parent.name for p in Path(root).glob(f"*/{SUITE_FILE}"))


_KEYS = {
    "title", "source", "requires_dataset", "rows", "comparisons", "best_of", "fusion", "tune",
    "evaluation", "seeds", "test_metrics",
}
TEST_METRICS = ("rank", "nDCG", "mAP")


def load_suite(name: str, root: Path = SUITES_DIR) -> Suite:
    """Read and check ``<root>/<name>/suite.yaml`` and every row config it lists."""
    folder = Path(root) / name
    meta_path = folder / SUITE_FILE
    if not meta_path.is_file():
        raise SuiteError(f"unknown suite {name!r}; available: {', '.join(suite_names(root))}")
    meta = _load(meta_path)
    unknown = sorted(set(meta) - _KEYS)
    if unknown:
        raise SuiteError(f"{meta_path}: unknown key(s) {unknown}; valid keys: {sorted(_KEYS)}")
    for key in ("title", "rows"):
        if key not in meta:
            raise SuiteError(f"{meta_path}: missing key {key!r}")
    protocol = _protocol(meta_path, meta.get("evaluation"))
    rows = []
    for i, entry in enumerate(meta["rows"]):
        if not isinstance(entry, dict) or set(entry) != {"config", "label"}:
            raise SuiteError(
                f"{meta_path}: rows[{i}] must be a mapping with exactly 'config' and 'label'"
            )
        path = folder / entry["config"]
        rows.append(Row(str(entry["label"]), path, _with_rho(path, _load(path), protocol.rho)))
    labels = [r.label for r in rows]
    if len(set(labels)) != len(labels):
        raise SuiteError(f"{meta_path}: row labels must be unique, got {labels}")
    best_of = tuple(str(x) for x in meta.get("best_of") or ())
    _known(meta_path, "best_of", best_of, labels)
    specs = meta.get("fusion")
    specs = [] if specs is None else specs if isinstance(specs, list) else [specs]
    losses_of = {r.label: (r.data.get("loss") or {}).get("name", "mm") for r in rows}
    fusions = tuple(_fusion(meta_path, spec, losses_of) for spec in specs)
    fusion_labels = [f.label(m) for f in fusions for m in f.methods]
    if len(set(fusion_labels)) != len(fusion_labels):
        raise SuiteError(f"{meta_path}: fusion rows need distinct names, got {fusion_labels}")
    comparisons = []
    for i, entry in enumerate(meta.get("comparisons") or ()):
        if not isinstance(entry, dict) or set(entry) != {"a", "b"}:
            raise SuiteError(
                f"{meta_path}: comparisons[{i}] must be a mapping with exactly 'a' and 'b'"
            )
        pair = (str(entry["a"]), str(entry["b"]))
        allowed = labels + fusion_labels + ([BEST] if best_of else [])
        _known(meta_path, f"comparisons[{i}]", pair, allowed)
        comparisons.append(pair)
    seeds = meta.get("seeds", DEFAULT_SEEDS)
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 2:
        raise SuiteError(f"{meta_path}: seeds must be an integer of at least 2 (the run-level "
                         f"tests need two runs of each row), got {seeds!r}")
    metrics = tuple(meta.get("test_metrics") or ("rank",))
    if not set(metrics) <= set(TEST_METRICS) or len(set(metrics)) != len(metrics):
        raise SuiteError(f"{meta_path}: test_metrics must be distinct names of "
                         f"{list(TEST_METRICS)}, got {list(metrics)}")
    return Suite(
        name,
        folder,
        str(meta["title"]),
        str(meta.get("source", "")),
        tuple(rows),
        tuple(comparisons),
        best_of,
        fusions,
        meta.get("requires_dataset"),
        _tune(meta_path, meta.get("tune")),
        protocol,
        seeds,
        metrics,
    )


def _protocol(path: Path, spec) -> Protocol:
    """The suite's checked ``evaluation`` section (defaults when absent)."""
    if spec is None:
        return Protocol()
    if not isinstance(spec, dict) or set(spec) - {"rho", "relevance"}:
        raise SuiteError(f"{path}: evaluation must be a mapping of rho and relevance")
    rho = spec.get("rho", DEFAULT_RHO)
    if isinstance(rho, bool) or not isinstance(rho, int | float) or not 0 < rho <= 1:
        raise SuiteError(f"{path}: evaluation.rho must be a number in (0, 1], got {rho!r}")
    relevance = spec.get("relevance", "reference")
    if relevance not in RELEVANCE_DEFINITIONS:
        raise SuiteError(
            f"{path}: evaluation.relevance must be one of {list(RELEVANCE_DEFINITIONS)}, "
            f"got {relevance!r}"
        )
    return Protocol(float(rho), relevance)


def _with_rho(path: Path, data: dict, rho: float) -> dict:
    """The row's data with ``supervision.rho`` = the protocol's (a row may not set another)."""
    supervision = data.get("supervision") or {}
    if "rho" in supervision and supervision["rho"] != rho:
        raise SuiteError(
            f"{path}: supervision.rho is {supervision['rho']!r} but the suite's evaluation "
            f"protocol fixes rho {rho:g}; remove it from the row or change evaluation.rho"
        )
    return {**data, "supervision": {**supervision, "rho": rho}}


def _tune(path: Path, spec) -> dict | None:
    """The suite's ``tune`` section: a mapping, or a YAML file named relative to the suite."""
    if spec is None or isinstance(spec, dict):
        return spec
    if not isinstance(spec, str):
        raise SuiteError(f"{path}: tune must be a mapping or the name of a YAML file")
    return _load(path.parent / spec)


def _load(path: Path) -> dict:
    try:
        return load_yaml(path)
    except ConfigError as error:
        raise SuiteError(str(error)) from None


def _known(path: Path, where: str, names, allowed) -> None:
    missing = [n for n in names if n not in allowed]
    if missing:
        raise SuiteError(f"{path}: {where} names unknown row(s) {missing}; rows: {list(allowed)}")


def _fusion(path: Path, spec, losses_of: dict[str, str]) -> Fusion:
    keys = {"members", "methods", "hybrid_q", "name", "pool_seeds", "mixed_losses"}
    if not isinstance(spec, dict) or set(spec) - keys:
        raise SuiteError(f"{path}: fusion must be a mapping of {sorted(keys)} (or a list of them)")
    members = tuple(str(m) for m in spec.get("members") or ())
    _known(path, "fusion.members", members, list(losses_of))
    if len(members) < 2 and not spec.get("pool_seeds"):
        raise SuiteError(f"{path}: fusion needs at least two members, got {list(members)}")
    methods = tuple(spec.get("methods") or FUSION_METHODS)
    bad = [m for m in methods if m not in FUSION_METHODS]
    if bad:
        raise SuiteError(f"{path}: fusion.methods {bad} unknown; use {list(FUSION_METHODS)}")
    q = spec.get("hybrid_q", 2)
    most = len(members) if not spec.get("pool_seeds") else None
    if not isinstance(q, int) or q < 1 or (most is not None and q > most):
        raise SuiteError(
            f"{path}: fusion.hybrid_q must be an integer in [1, {most or 'models'}], got {q!r}"
        )
    mixed = bool(spec.get("mixed_losses", False))
    losses = sorted({losses_of[m] for m in members})
    if len(losses) > 1 and not mixed:
        raise SuiteError(
            f"{path}: fusion members {list(members)} train with different losses {losses}; "
            "fuse runs of one loss (the paper's setting), or set mixed_losses: true"
        )
    return Fusion(members, methods, q, str(spec.get("name", "")),
                  bool(spec.get("pool_seeds", False)), mixed)


def row_data(
    row: Row, dataset: str | None = None, epochs: int | None = None, settings: dict | None = None
) -> dict:
    """The row's YAML content with the runner's overrides (dataset, epochs) and ``settings``
    (dotted keys to values, e.g. tuned hyper-parameters), as a dict."""
    data = copy.deepcopy(row.data)
    for key, value in (settings or {}).items():
        *sections, name = key.split(".")
        node = data
        for part in sections:
            node = node.setdefault(part, {})
        node[name] = value  # as given: no YAML round trip (YAML 1.1 reads 1e-05 as a string)
    if dataset is not None:
        apply_override(data, f"data.dataset={json.dumps(str(dataset))}")
    if epochs is not None:
        apply_override(data, f"epochs={int(epochs)}")
    return data


def row_config(
    row: Row,
    dataset: str | None = None,
    epochs: int | None = None,
    seed: int = 0,
    settings: dict | None = None,
) -> TrainConfig:
    """The row's TrainConfig with the runner's overrides (dataset, epochs, seed, settings),
    checked. Its ``loss.params`` hold every loss parameter, at its current default where the
    row leaves it out (those the run supplies, default ``None``, stay out), so the run's
    ``config.yaml`` records them and :func:`config_changes` sees a changed default."""
    data = row_data(row, dataset, epochs, settings)
    apply_override(data, f"seed={int(seed)}")
    try:
        config = from_dict(data)
    except (RudderError, ValueError) as error:
        raise SuiteError(f"{row.path}: {error}") from None
    defaults = {k: v for k, v in losses.defaults(config.loss.name).items() if v is not None}
    config.loss.params = {**defaults, **config.loss.params}
    return config


def run_key(data: dict, dataset_fingerprint: str) -> str:
    """``<name>-<8 hex>``: SHA-256 of the row's explicit settings (:func:`row_data`, no seed)
    and the dataset fingerprint.

    Equal rows (across suites) share their runs. Only the explicit settings are hashed, so
    a new TrainConfig field with a default keeps old runs usable; a changed default is caught
    by :func:`config_changes` against the run's saved ``config.yaml``.
    """
    data = {k: v for k, v in data.items() if k != "seed"}
    text = json.dumps({"config": data, "dataset": dataset_fingerprint}, sort_keys=True)
    return f"{data.get('name', 'run')}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def config_changes(saved: dict, config: TrainConfig | dict, prefix: str = "") -> list[str]:
    """Settings whose saved value (a run's ``config.yaml``) differs from ``config``'s, over the
    keys both have (fields added to TrainConfig later, or filled in by the trainer, are not
    differences; nor are loss parameters that a run trained before :func:`row_config` wrote
    them all left out of its config.yaml)."""
    current = to_dict(config) if isinstance(config, TrainConfig) else config
    changes = []
    for key in sorted(set(saved) & set(current)):
        a, b = saved[key], current[key]
        if isinstance(a, dict) and isinstance(b, dict):
            changes += config_changes(a, b, f"{prefix}{key}.")
        elif a != b:
            changes.append(f"{prefix}{key}: {a!r} in the run, {b!r} now")
    return changes
