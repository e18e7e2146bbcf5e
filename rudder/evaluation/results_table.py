"""Plain-text result tables for the console and the README.

A metric that is n/a (``None`` in metrics.json: e.g. mAP when no query has a fully relevant
item) prints ``n/a``; a column that is n/a in every row is left out, with a one-line note, and
so are nDCG and mAP on a dataset without noun/verb classes (no row has them).
"""

from __future__ import annotations

from rudder.metric_names import RELEVANCE_METRICS
from rudder.metric_names import TABLE_METRICS as COLUMNS

NA = "n/a"
RELEVANT = {"nDCG": "> 0", "mAP": "= 1"}  # the items each metric counts as relevant


def _is_na(value) -> bool:
    return value is None or (isinstance(value, dict) and value.get("mean") is None)


def _columns(rows: list[dict]) -> tuple[list[str], list[str]]:
    """(columns shown, columns left out because every row is n/a or, for the relevance
    metrics, no row has them: the dataset has no noun/verb classes)."""
    shown: list[str] = []
    dropped: list[str] = []
    for c in COLUMNS:
        present = [r[c] for r in rows if c in r]
        absent = c in RELEVANCE_METRICS and not present
        all_na = bool(present) and all(_is_na(v) for v in present)
        (dropped if absent or all_na else shown).append(c)
    return shown, dropped


def _notes(rows: list[dict], dropped: list[str]) -> list[str]:
    """One line per left-out column (one for the relevance metrics of a dataset without
    noun/verb classes), and the query counts of the relevance metrics (rows: t2v, then
    v2t)."""
    unlabelled = [c for c in dropped if not any(c in r for r in rows)]
    notes = [f"{c}: n/a, no query has an item with R {RELEVANT[c]} (what {c} counts as "
             "relevant) at this rho; column left out (docs/fidelity.md, 'nDCG and mAP')"
             for c in dropped if c not in unlabelled]
    if unlabelled:
        notes.append(f"{' and '.join(unlabelled)}: n/a, the dataset has no noun/verb classes "
                     "(relevance needs them; add them with `python -m heuristics label`); "
                     f"column{'s' if len(unlabelled) > 1 else ''} left out")
    for c in RELEVANCE_METRICS:
        counts = [f"{d} {int(r[f'{c}_queries'])}" for d, r in zip(("t2v", "v2t"), rows, strict=True)
                  if c not in dropped and not _is_na(r.get(c)) and f"{c}_queries" in r]
        if counts:
            notes.append(f"{c}: the mean over the queries that have an item with R "
                         f"{RELEVANT[c]}: {', '.join(counts)}")
    return notes


def _header(columns: list[str]) -> list[str]:
    return ["| queries | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]


def _row(label: str, values: dict, columns: list[str]) -> str:
    cells = [("-" if c not in values else NA if values[c] is None else f"{values[c]:.1f}")
             for c in columns]
    return f"| {label} | " + " | ".join(cells) + " |"


def results_table(metrics: dict, title: str = "") -> str:
    """Markdown table of a run's ``metrics.json``: t2v, v2t, then t2v per caption language."""
    test = metrics["test"]
    rows = [("text→video", test["t2v"]), ("video→text", test["v2t"])]
    rows += [(f"text→video ({lang})", values)
             for lang, values in sorted(test.get("per_language", {}).items())]
    columns, dropped = _columns([test["t2v"], test["v2t"]])
    lines = [f"### Test results — {title}" if title else "### Test results", ""]
    lines += _header(columns) + [_row(label, values, columns) for label, values in rows]
    notes = _notes([test["t2v"], test["v2t"]], dropped)
    if "best_epoch" in metrics:
        notes.append(f"best epoch {metrics['best_epoch']} of {metrics['epochs_run']} "
                     "(selected on validation)")
    return "\n".join(lines + ([""] + notes if notes else []))


def seeds_table(summary: dict) -> str:
    """Markdown table of mean ± std over seeds."""
    directions = [summary["test"][d] for d in ("t2v", "v2t")]
    columns, dropped = _columns(directions)
    lines = [f"### Test results over seeds {summary['seeds']} (mean ± std)", ""]
    lines += _header(columns)
    for values, label in zip(directions, ("text→video", "video→text"), strict=True):
        cells = [("-" if c not in values else NA if _is_na(values[c])
                  else f"{values[c]['mean']:.1f} ± {values[c]['std']:.1f}") for c in columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    notes = _notes([{k: (v.get("mean") if isinstance(v, dict) else v) for k, v in d.items()}
                    for d in directions], dropped)
    return "\n".join(lines + ([""] + notes if notes else []))
