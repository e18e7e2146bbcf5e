"""The app's search model, present at once or arriving while the page is already served.

``python -m app`` without a trained model serves the page first and trains a quick model in a
background thread: until :meth:`ModelSlot.fill` gives the slot its :class:`SearchEngine`,
the search tab and the header say what is happening (:meth:`ModelSlot.progress_markdown`);
the annotation and results tabs need no model and work from the start.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rudder.runs.layout import read_history

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
        done = min(self.epochs_done(), self.epochs)
        now = time.monotonic()
        if done > self._last_epoch[0]:
            self._last_epoch = (done, now)
        step = ("building the search index" if self.stage == "indexing"
                else f"epoch {min(done + 1, self.epochs)} of {self.epochs}")
        left = ""
        if 0 < done < self.epochs and self.stage != "indexing":
            seen_done, seen_at = self._last_epoch
            per_epoch = (seen_at - self.started) / seen_done
            remaining = per_epoch * (self.epochs - seen_done) - (now - seen_at)
            left = f", about {max(remaining, 1):.0f} s of training left"
        return (f"**A first model is training on this dataset** ({step}; {done} of "
                f"{self.epochs} epochs done, {seconds:.0f} s so far{left}). Search works as soon "
                "as it is ready, on this page without reloading; the Annotate and Results "
                "tabs work now.")

    def progress_html(self) -> str:
        """A ``<progress>`` bar of :meth:`progress` ('' once ready)."""
        if self.ready or self.error:
            return ""
        done, total = self.progress()
        return (f"<progress id='rudder-training-bar' value='{done}' max='{total}' "
                f"style='width:100%'>{done} of {total}</progress>")
