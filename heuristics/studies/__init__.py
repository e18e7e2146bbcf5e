"""Measurements behind docs/heuristics.md: the UD tagger table and the EPIC-KITCHENS-100 check.

Each study is a command (``python -m heuristics.studies.<name>``) with a top-level
``build_parser()`` (swept by ``tests/test_cli_sweep.py``) and a ``main()`` whose work runs
inside :func:`exit_on_error`: a file it cannot read is one ``error:`` line naming the file,
exit code 2.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rudder import errors

from ..classes import ClassFileError
from ..conllu import ConlluError
from ..stanza_training import TrainingError
from ..taggers import TaggerError

# The errors of the readers and the tagger the studies use (not RudderError subclasses).
READER_ERRORS = (ConlluError, ClassFileError, TaggerError, TrainingError)


@contextmanager
def exit_on_error() -> Iterator[None]:
    """:func:`rudder.errors.exit_on_error`, which also reports :data:`READER_ERRORS`."""
    with errors.exit_on_error():
        try:
            yield
        except READER_ERRORS as error:
            raise errors.RudderError(str(error)) from None


def run_study(parser, work, argv=None) -> int:
    """Parse ``argv`` with ``parser`` and run ``work(args)`` inside :func:`exit_on_error`."""
    args = parser.parse_args(argv)
    with exit_on_error():
        return work(args)
