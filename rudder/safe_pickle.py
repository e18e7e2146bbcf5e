"""Unpickling data files with an allow-list, so a pickle cannot run code when read.

Pickles can run code when loaded (a ``__reduce__`` payload names any callable). Data
pickles rudder reads (CE's text and expert features, RUDDER's ``rudder_*.pkl``) hold only
plain containers, numbers, strings and numpy arrays, so :class:`SafeUnpickler` resolves
only those globals and refuses anything else before it is built, naming the file.
Pickles written by Python 2 or with protocols 0-2 load too (numpy's ``encoding="latin1"``
and the ``_codecs.encode`` those protocols store array bytes with).
"""

from __future__ import annotations

import pickle
from pathlib import Path

from rudder.errors import RudderError

ALLOWED = frozenset({
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("collections", "OrderedDict"), ("builtins", "list"), ("builtins", "dict"),
    ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "tuple"),
    ("_codecs", "encode"),  # protocols 0-2 store an array's bytes as encode(latin-1 text)
})


class UnsafePickleError(RudderError):
    """A pickle asked to build an object outside :data:`ALLOWED`; nothing of it ran."""


class SafeUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` that resolves only the globals in :data:`ALLOWED`."""

    def __init__(self, handle, path, error: type[Exception] = UnsafePickleError,
                 what: str = "a data pickle"):
        super().__init__(handle, encoding="latin1")  # numpy's advice for Python 2 pickles
        self.path, self.error, self.what = path, error, what

    def find_class(self, module, name):
        if (module, name) not in ALLOWED:
            raise self.error(
                f"{self.path}: refusing to unpickle {module}.{name}: {self.what} may only hold "
                "dicts, lists, numbers, strings and numpy arrays (a pickle can run code when "
                "loaded; this one was made elsewhere or tampered with)"
            )
        return super().find_class(module, name)


# What a damaged pickle raises while loading (besides OSError).
DAMAGED = (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
           ImportError, IndexError, KeyError, MemoryError)


def safe_load(path, error: type[Exception] = UnsafePickleError, what: str = "a data pickle"):
    """The content of the pickle at ``path``, read with :class:`SafeUnpickler`; ``error``
    naming the file when it is refused, unreadable or damaged."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            return SafeUnpickler(handle, path, error, what).load()
    except error:
        raise
    except OSError as failure:
        raise error(f"{path}: cannot read ({failure.strerror or failure})") from None
    except DAMAGED as failure:
        raise error(
            f"{path}: cannot be unpickled ({type(failure).__name__}: {failure}); is it a "
            "complete pickle file?"
        ) from None
