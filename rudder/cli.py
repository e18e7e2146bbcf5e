"""What every command line shares: one-line usage errors and bounded number types.

:class:`ArgumentParser` prints a usage error as one ``error:`` line naming the flag (exit
code 2, as :func:`rudder.errors.exit_on_error` does for every other user error); its
subcommand parsers are of the same class. :func:`int_in` and :func:`float_in` are argparse
types that refuse a value of the wrong type or outside ``[low, high]`` while the command line
is parsed, before any work; ``tests/test_cli_sweep.py`` feeds every numeric flag of every
command such values.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from rudder.errors import EXIT_CODE, one_line


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose usage errors are one line on stderr, exit code 2."""

    def error(self, message):
        self.exit(EXIT_CODE, f"error: {self.prog}: {one_line(message)} (see --help)\n")


def int_in(low: int, high: int):
    """An argparse type: an integer in ``[low, high]``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer in [{low}, {high}], got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside [{low}, {high}]")
        return value

    parse.__name__ = f"integer in [{low}, {high}]"  # argparse names the type in its errors
    return parse


def float_in(low: float, high: float, low_open: bool = False):
    """An argparse type: a finite number in ``[low, high]`` (``(low, high]`` with
    ``low_open``)."""
    left = "(" if low_open else "["

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        inside = (value > low if low_open else value >= low) and value <= high
        if not math.isfinite(value) or not inside:
            raise argparse.ArgumentTypeError(
                f"expected a number in {left}{low:g}, {high:g}], got {text!r}")
        return value

    parse.__name__ = f"number in {left}{low:g}, {high:g}]"
    return parse


def folder(text: str) -> Path:
    """An argparse type: a folder path; a path that exists but is not a folder is refused."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
    return path


folder.__name__ = "folder"


def output_file(text: str) -> Path:
    """An argparse type: a file to (re)write; a path that is an existing folder is refused."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; give a file name")
    return path


output_file.__name__ = "output file"
