"""``python -m experiments.report NAME [--check]``: recompute a suite's tables and tests from
its committed per-query ranks (``experiments/results/<suite>-ranks.npz``), and check them.

NAME is a suite (its ``<suite>.md``, ``<suite>.csv`` and ``<suite>-tests.csv``), ``claims``
(every claim of README.md and experiments/README.md with one Holm correction over all of
them: :mod:`experiments.claims`) or ``calibration`` (the run-level tests between runs of one
configuration: :mod:`experiments.calibrate`). Without ``--check`` the files are written;
with it nothing is written and the command exits 1 when a committed file differs from its
recomputation (naming the files and the first differing line), 0 when all agree, 2 on an
error (a missing or malformed archive).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

from rudder.atomic import atomic_write_text
from rudder.cli import ArgumentParser, folder

from . import tables
from .archive import ArchiveError, archive_path, read_archive
from .collect import RowResult
from .suite_cli import DEFAULT_OUTPUT

SPECIAL = ("claims", "calibration")


def render_suite(name: str, rows: dict[str, RowResult], meta: dict) -> dict[str, str]:
    """``{file name: text}`` of a suite's markdown table, metrics CSV and tests CSV."""
    summaries = {label: tables.summarise(row) for label, row in rows.items()}
    tests = tables.adjust([
        tables.compare(rows[a], rows[b], d, metric)
        for a, b in meta["comparisons"]
        for metric in meta.get("test_metrics", ["rank"])
        for d in tables.DIRECTION_TITLES
    ])
    runs = {label: len(row.seeds) for label, row in rows.items()}
    at_cap = meta.get("runs_at_epoch_cap")
    return {
        f"{name}.md": tables.markdown(summaries, tests, meta["header"], meta.get("notes", ())),
        f"{name}.csv": tables.metrics_csv(name, summaries, runs, at_cap),
        f"{name}-tests.csv": tables.tests_csv(name, tests),
    }


def render(name: str, output: Path) -> dict[str, str]:
    """The files of ``name`` (a suite, ``claims`` or ``calibration``) recomputed from the
    archives under ``output``."""
    if name == "claims":
        from .claims import render_claims

        return render_claims(output)
    if name == "calibration":
        from .calibration import render_calibration

        return render_calibration(output)
    rows, meta = read_archive(archive_path(output, name))
    return render_suite(name, rows, meta)


def write(name: str, output: Path) -> list[Path]:
    """Write the recomputed files of ``name`` to ``output``; their paths."""
    written = []
    for file, text in render(name, output).items():
        written.append(atomic_write_text(Path(output) / file, text))
    return written


def check(name: str, output: Path) -> list[str]:
    """One line per committed file of ``name`` that differs from its recomputation (or is
    missing); empty when all agree."""
    problems = []
    for file, text in render(name, output).items():
        path = Path(output) / file
        if not path.is_file():
            problems.append(f"{path}: missing (recomputed from the ranks, it would be written)")
            continue
        committed = path.read_text(encoding="utf-8")
        if committed != text:
            diff = difflib.unified_diff(committed.splitlines(), text.splitlines(), lineterm="",
                                        n=0)
            changed = [line for line in diff if line[:1] in "+-" and line[:3] not in "+++---"]
            problems.append(f"{path}: differs from its recomputation from the ranks "
                            f"({len(changed)} changed lines; first: {changed[0][:160]!r})")
    return problems


def report_name(value: str) -> str:
    """A suite's name (lower-case letters, digits and '-': a file name in ``--output``)."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a suite name (lower-case letters, digits and '-', e.g. "
            f"rudder-table1) nor one of {', '.join(SPECIAL)}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog=f"python -m {__package__}.report",
        description="Recompute a suite's tables and tests from its committed per-query ranks "
        "(<output>/<suite>-ranks.npz); --check compares them with the committed files.",
    )
    parser.add_argument("name", type=report_name,
                        help=f"a suite, or one of {', '.join(SPECIAL)}")
    parser.add_argument("--output", type=folder, default=DEFAULT_OUTPUT,
                        help=f"folder of the archives and tables (default {DEFAULT_OUTPUT})")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when a committed file differs")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.check:
            problems = check(args.name, args.output)
            for line in problems:
                print(line, file=sys.stderr)
            if not problems:
                print(f"{args.name}: every table and test agrees with its ranks")
            return 1 if problems else 0
        for path in write(args.name, args.output):
            print(f"written {path}")
    except (ArchiveError, OSError, ValueError) as error:
        print(f"error: {args.name}: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
