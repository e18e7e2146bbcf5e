"""The app's search model, present at once or arriving while the page is already served.

``python -m app`` without a trained model serves the page first and trains a quick model in a
background thread: until :meth:`ModelSlot.fill` gives the slot its :class:`SearchEngine`,
the search tab and the header say what is happening (:meth:`ModelSlot.progress_markdown`):
first the sentence encoder's pass over the captions (n of N, rate, time left; once, then
cached), then the epochs; the annotation and results tabs need no model and work from the
start.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import Path

from rudder.runs.layout import read_history
from rudder.text import encoding_progress

from .escaping import markdown_text


class ModelSlot:
    """Holds the :class:`app.engine.SearchEngine` once it exists, and the training progress
    until then (``run_dir``: the run being trained; ``epochs``: how many it trains)."""

    def __init__(self, engine=None, description: str = "", run_dir=None, epochs: int = 0):
        self.engine = engine
        self.description = description
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.epochs = epochs
        self.stage = "ready" if engine is not None else "training"
        self.error: str | None = None
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._last_epoch = (0, self.started)  # (epochs done, when that count was first seen)
        self.encoding: encoding_progress.EncodingStatus | None = None
        self.training_started: float | None = None  # after the encoder's pass, if any

    @property
    def ready(self) -> bool:
        return self.engine is not None

    def fill(self, engine, description: str) -> None:
        with self._lock:
            self.engine, self.description, self.stage = engine, description, "ready"

    def set_stage(self, stage: str) -> None:
        with self._lock:
            self.stage = stage

    def fail(self, message: str) -> None:
        with self._lock:
            self.error, self.stage = message, "failed"

    @contextmanager
    def encoding_progress(self):
        """While inside, the sentence encoder's passes of this process report to the slot
        (the training runs in this process: :func:`app.__main__.train_quick`)."""
        def listen(status: encoding_progress.EncodingStatus) -> None:
            with self._lock:
                self.encoding = None if status.finished else status
                if status.finished:
                    self.training_started = time.monotonic()
                    self._last_epoch = (0, self.training_started)

        encoding_progress.add_listener(listen)
        try:
            yield self
        finally:
            encoding_progress.remove_listener(listen)
            with self._lock:
                self.encoding = None

    def epochs_done(self) -> int:
        """Evaluated epochs in the run's ``metrics.jsonl`` so far."""
        if self.run_dir is None:
            return 0
        try:
            return len(read_history(self.run_dir))
        except Exception:  # noqa: BLE001 -- a file being written reads as no progress
            return 0

    def progress(self) -> tuple[int, int]:
        """(steps done, steps in all): the epochs, then one step for the search index."""
        total = self.epochs + 1
        if self.ready:
            return total, total
        return min(self.epochs_done(), self.epochs), total

    def progress_markdown(self) -> str:
        """What the page says while the model is not ready ('' once it is)."""
        if self.ready:
            return ""
        seconds = time.monotonic() - self.started
        if self.error:
            return (f"⚠ **Training the first model failed**: {markdown_text(self.error)} "
                    "(see the server's log). The Annotate and Results tabs still work.")
        encoding = self.encoding
        if encoding is not None:
            return (f"**A first model is being prepared on this dataset**: "
                    f"{markdown_text(encoding.text())}, once (then cached); then at most "
                    f"{self.epochs} epochs of training ({seconds:.0f} s so far). Search works "
                    "as soon as it is ready, on this page without reloading; the Annotate and "
                    "Results tabs work now.")
        done = min(self.epochs_done(), self.epochs)
        now = time.monotonic()
        if done > self._last_epoch[0]:
            self._last_epoch = (done, now)
        step = ("building the search index" if self.stage == "indexing"
                else f"epoch {min(done + 1, self.epochs)} of at most {self.epochs}")
        left = ""
        if 0 < done < self.epochs and self.stage != "indexing":
            seen_done, seen_at = self._last_epoch
            began = self.training_started or self.started
            per_epoch = (seen_at - began) / seen_done
            remaining = per_epoch * (self.epochs - seen_done) - (now - seen_at)
            left = f", at most about {max(remaining, 1):.0f} s of training left"
        return (f"**A first model is training on this dataset** ({step}; {done} of at most "
                f"{self.epochs} epochs done, {seconds:.0f} s so far{left}; it stops early once "
                "validation stops improving). Search works as soon as it is ready, on this page "
                "without reloading; the Annotate and Results tabs work now.")

    def progress_html(self) -> str:
        """A ``<progress>`` bar of :meth:`progress` ('' once ready); while the sentence
        encoder encodes the captions, a bar of that pass."""
        if self.ready or self.error:
            return ""
        encoding = self.encoding
        if encoding is not None:
            return (f"<progress id='rudder-encoding-bar' value='{encoding.done}' "
                    f"max='{encoding.total}' style='width:100%'>{encoding.done} of "
                    f"{encoding.total}</progress>")
        done, total = self.progress()
        return (f"<progress id='rudder-training-bar' value='{done}' max='{total}' "
                f"style='width:100%'>{done} of {total}</progress>")
