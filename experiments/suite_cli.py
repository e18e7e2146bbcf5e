"""The command-line arguments the suite commands share (``python -m experiments.run`` and
``python -m experiments.tune``): the suite, the dataset and the folders."""

from __future__ import annotations

import argparse
from pathlib import Path

from rudder.cli import ArgumentParser, folder

from .suites import SUITES_DIR, suite_names

DEFAULT_RUNS_DIR = Path("runs") / "experiments"
DEFAULT_OUTPUT = Path("experiments") / "results"


def suite_parser(prog: str, description: str,
                 default_suite: str | None = None) -> argparse.ArgumentParser:
    """The arguments experiments.run and experiments.tune share: suite, dataset and folders
    (with ``default_suite``, the suite may be left out)."""
    parser = ArgumentParser(
        prog=prog,
        description=description,
        epilog=f"Suites: {', '.join(suite_names())}. See experiments/README.md.",
    )
    if default_suite is None:
        parser.add_argument("suite", help="suite name (a folder of experiments/suites)")
    else:
        parser.add_argument("suite", nargs="?", default=default_suite,
                            help=f"suite name (default {default_suite})")
    parser.add_argument(
        "--dataset",
        help="dataset folder (required by the real-dataset suites; "
        "replaces data.dataset of every row)",
    )
    parser.add_argument(
        "--output",
        type=folder,
        default=DEFAULT_OUTPUT,
        help=f"folder for the tables, plots and tuned settings (default {DEFAULT_OUTPUT})",
    )
    parser.add_argument(
        "--runs-dir",
        type=folder,
        default=DEFAULT_RUNS_DIR,
        help=f"folder of the run directories (default {DEFAULT_RUNS_DIR}, gitignored)",
    )
    parser.add_argument(
        "--suites-dir",
        type=folder,
        default=SUITES_DIR,
        help="folder of suite folders (default: experiments/suites)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the plan (runs and their status) and stop"
    )
    return parser
