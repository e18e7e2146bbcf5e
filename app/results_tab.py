"""The results tab: training runs under ``runs/`` side by side, with R@K and loss plots.

Each plot compares like with like: recall plots put runs on one axis (the same metric
whatever the loss), while training-loss values of different loss functions are on
different scales, so the loss figure has one panel per loss; every legend entry names its
run's loss. Test metrics per query language (``metrics.json``'s ``test.per_language``) get a
table of their own.

A run is a folder holding test metrics (``metrics.json``; docs/architecture.md) and/or its
validation
history (``metrics.jsonl``: ``epoch``, ``train_loss``, ``t2v``, ``v2t`` per evaluation); the
files are :mod:`rudder.runs.layout`'s. Folders with neither are ignored; unreadable files count
as empty, never as fatal.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from rudder.errors import RudderError
from rudder.metric_names import RECALL_KS as KS
from rudder.metric_names import TABLE_METRICS as METRICS
from rudder.runs.layout import folders_with_results, read_config, read_history, read_metrics

from .escaping import markdown_text


def _metrics(run: Path) -> dict:
    try:
        metrics = read_metrics(run)
    except RudderError:
        return {}
    return metrics if isinstance(metrics, dict) else {}


def _history(run: Path) -> list[dict]:
    """The run's validation evaluations; a torn last line (being written) is left out."""
    try:
        return read_history(run)
    except (RudderError, OSError):
        return []


def find_runs(root) -> list[Path]:
    """Run folders under ``root`` (any depth: seed sub-runs too), newest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = folders_with_results(root)
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def _config(run: Path) -> dict:
    try:
        return read_config(run)
    except (RudderError, OSError):
        return {}


def _number(value):
    """A metric value; seed summaries store ``{"mean", "std"}``: take the mean."""
    if isinstance(value, dict):
        value = value.get("mean")
    return float(value) if isinstance(value, (int, float)) else None


def runs_table(root) -> pd.DataFrame:
    """One row per run: name, dataset, loss, best epoch, and test t2v / v2t metrics."""
    rows = []
    for run in find_runs(root):
        metrics = _metrics(run)
        config = _config(run)
        test = metrics.get("test", {})
        row = {
            "run": str(run.relative_to(root)),
            "dataset": str(config.get("data", {}).get("dataset", "")),
            "loss": str(config.get("loss", {}).get("name", "")),
            "best epoch": metrics.get("best_epoch"),
        }
        for direction in ("t2v", "v2t"):
            for key in METRICS:
                row[f"{direction} {key}"] = _number(test.get(direction, {}).get(key))
        rows.append(row)
    columns = ["run", "dataset", "loss", "best epoch"] + [
        f"{d} {k}" for d in ("t2v", "v2t") for k in METRICS
    ]
    table = pd.DataFrame(rows, columns=columns)
    empty = [c for c in columns[4:] if table[c].isna().all()]  # metrics no run has
    return table.drop(columns=empty).round(2)


LANGUAGE_METRICS = ("R1", "R5", "R10", "MdR")


def per_language_table(root) -> pd.DataFrame:
    """One row per run and query language: test text-to-video metrics of that language's
    queries (runs without ``test.per_language`` have no rows)."""
    rows = []
    for run in find_runs(root):
        per_language = _metrics(run).get("test", {}).get("per_language") or {}
        loss = str(_config(run).get("loss", {}).get("name", ""))
        for lang, values in per_language.items():
            if not isinstance(values, dict):
                continue
            row = {"run": str(run.relative_to(root)), "loss": loss, "language": str(lang)}
            for key in LANGUAGE_METRICS:
                row[f"t2v {key}"] = _number(values.get(key))
            rows.append(row)
    columns = ["run", "loss", "language"] + [f"t2v {k}" for k in LANGUAGE_METRICS]
    return pd.DataFrame(rows, columns=columns).round(2)


def _loss_of(run: Path) -> str:
    return str(_config(run).get("loss", {}).get("name", "")) or "unknown loss"


def plot_runs(root, names) -> tuple:
    """(test R@K curves, validation R@10 over epochs, training loss) figures of the runs.

    The loss figure has one panel per loss function (their values are not comparable);
    legend entries read ``run (loss)``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    root = Path(root)
    runs = []
    for name in names or []:
        run = (root / name).resolve()
        if run.is_relative_to(root.resolve()):  # never read outside the runs folder
            runs.append((name, run, _loss_of(run)))
    losses = sorted({loss for _, run, loss in runs if _history(run)}) or [""]
    figures = [plt.figure(figsize=(6, 4)), plt.figure(figsize=(6, 4))]
    figures.append(plt.figure(figsize=(6, 1.2 + 2.6 * len(losses))))
    axes = [figures[0].add_subplot(), figures[1].add_subplot()]
    loss_axes = dict(zip(losses, figures[2].subplots(len(losses), 1, sharex=True, squeeze=False)
                         [:, 0], strict=True))
    for name, run, loss in runs:
        label = f"{name} ({loss})"
        t2v = _metrics(run).get("test", {}).get("t2v", {})
        values = [_number(t2v.get(f"R{k}")) for k in KS]
        if all(v is not None for v in values):
            axes[0].plot(KS, values, marker="o", label=label)
        lines = _history(run)
        if lines:
            epochs = [r["epoch"] for r in lines]
            axes[1].plot(
                epochs,
                [_number(r.get("t2v", {}).get("R10")) for r in lines],
                marker=".",
                label=label,
            )
            loss_axes[loss].plot(
                epochs, [_number(r.get("train_loss")) for r in lines], marker=".", label=name
            )
    titles = [
        ("Test text-to-video R@K", "K", "R@K (%)"),
        ("Validation text-to-video R@10", "epoch", "R@10 (%)"),
    ]
    for ax, (title, xlabel, ylabel) in zip(axes, titles, strict=False):
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
    for loss, ax in loss_axes.items():
        ax.set_title(f"Training loss: {loss}" if loss else "Training loss")
        ax.set_ylabel(f"{loss} loss" if loss else "loss")
    list(loss_axes.values())[-1].set_xlabel("epoch")
    for ax in [*axes, *loss_axes.values()]:
        if ax.lines:
            ax.legend(fontsize="small")
    axes[0].set_xscale("log")
    axes[0].set_xticks(KS, [str(k) for k in KS])
    for figure in figures:
        figure.tight_layout()
        plt.close(figure)
    return tuple(figures)


class ResultsTab:
    """Handlers and layout of the results tab over one runs folder."""

    def __init__(self, runs_dir):
        self.runs_dir = Path(runs_dir)

    def refresh(self):
        """-> (runs table, per-language table, run selector update)."""
        import gradio as gr

        table = runs_table(self.runs_dir)
        names = table["run"].tolist()
        return table, per_language_table(self.runs_dir), gr.update(choices=names, value=names[:3])

    def plots(self, names):
        return plot_runs(self.runs_dir, names)

    def build(self, demo) -> None:
        import gradio as gr

        gr.Markdown(
            f"Runs found under {markdown_text(self.runs_dir)} "
            "(test metrics from metrics.json, in percent; "
            "the chosen runs are plotted, a change to the selection redraws)."
        )
        refresh = gr.Button("Refresh", elem_id="results-refresh")
        table = gr.Dataframe(interactive=False, label="Runs", elem_id="results-table")
        languages = gr.Dataframe(
            interactive=False,
            label="Test text-to-video metrics per query language",
            elem_id="results-languages",
        )
        chosen = gr.Dropdown(
            choices=[], multiselect=True, label="Runs to plot", elem_id="results-chosen"
        )
        with gr.Row():
            rk, curve, loss = (
                gr.Plot(label=label, elem_id=f"results-plot-{key}")
                for label, key in (
                    ("R@K", "rk"), ("Validation R@10", "validation"), ("Loss", "loss")
                )
            )
        views = [table, languages, chosen]
        refresh.click(self.refresh, None, views, api_name="list_runs")
        chosen.change(self.plots, chosen, [rk, curve, loss], api_name="plot_runs")
        demo.load(self.refresh, None, views, api_name="load_runs")
