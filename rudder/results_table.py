"""Plain-text result tables for the console and the README."""

from __future__ import annotations

from rudder.metric_names import TABLE_METRICS as COLUMNS


def _row(label: str, values: dict) -> str:
    cells = [f"{values[c]:.1f}" if c in values else "-" for c in COLUMNS]
    return f"| {label} | " + " | ".join(cells) + " |"


def results_table(metrics: dict, title: str = "") -> str:
    """Markdown table of a run's ``metrics.json``: t2v, v2t, then t2v per caption language."""
    test = metrics["test"]
    lines = [f"### Test results — {title}" if title else "### Test results", ""]
    lines += ["| queries | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    lines.append(_row("text→video", test["t2v"]))
    lines.append(_row("video→text", test["v2t"]))
    for lang, values in sorted(test.get("per_language", {}).items()):
        lines.append(_row(f"text→video ({lang})", values))
    if "best_epoch" in metrics:
        lines += ["", f"best epoch {metrics['best_epoch']} of {metrics['epochs_run']} (selected on validation)"]
    return "\n".join(lines)


def seeds_table(summary: dict) -> str:
    """Markdown table of mean ± std over seeds."""
    lines = [f"### Test results over seeds {summary['seeds']} (mean ± std)", ""]
    lines += ["| queries | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for direction, label in (("t2v", "text→video"), ("v2t", "video→text")):
        values = summary["test"][direction]
        cells = [f"{values[c]['mean']:.1f} ± {values[c]['std']:.1f}" if c in values else "-" for c in COLUMNS]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
