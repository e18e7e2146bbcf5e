"""What a sentence-encoder pass says while it encodes texts that are not cached yet.

A pass over many new texts (the first run or app start on a dataset with
``data.text_encoder=multilingual-e5``: minutes on a small CPU) prints one line when it starts
("encoding 8,161 captions with multilingual-e5-small: once, then cached in ..."), a progress
bar on a terminal (a line every ``every`` seconds in a log or a pipe), and one line when it
ends. Each update also goes to the registered listeners (the app's page shows the same
stage); the texts are written to the embedding cache as they are encoded, so the pass
happens once per model and text.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from rudder.progress import is_terminal, progress

# Passes over fewer new texts than this (a query, a few captions) are silent.
REPORTED_FROM = 100

_listeners: list[Callable[[EncodingStatus], None]] = []
_lock = threading.Lock()


@dataclass(frozen=True)
class EncodingStatus:
    """One moment of a pass: ``done`` of ``total`` texts, encoded at ``rate`` texts a second,
    about ``left_s`` seconds to go (None before the first batch); ``finished`` at its end."""

    model: str
    total: int
    done: int
    rate: float | None
    left_s: float | None
    cache: str
    finished: bool = False

    def text(self) -> str:
        """'encoding captions with M: 2,048 of 8,161 (25/s, about 4 min left)'."""
        head = f"encoding captions with {self.model}: {self.done:,} of {self.total:,}"
        if self.finished:
            return f"encoded {self.total:,} captions with {self.model}; cached in {self.cache}"
        if self.rate is None or self.left_s is None:
            return head
        return f"{head} ({self.rate:.0f}/s, about {duration(self.left_s)} left)"


def duration(seconds: float) -> str:
    """'40 s', '4 min', '1 h 5 min' (rounded up to whole seconds or minutes)."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{int(-(-seconds // 1))} s"
    minutes = int(-(-seconds // 60))
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def add_listener(listener: Callable[[EncodingStatus], None]) -> None:
    """Call ``listener(status)`` on every update of every pass of this process."""
    with _lock:
        _listeners.append(listener)


def remove_listener(listener: Callable[[EncodingStatus], None]) -> None:
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)


class EncodingProgress:
    """Reports one pass over ``total`` new texts (module docstring); a context manager."""

    def __init__(self, total: int, model: str, cache, stream=None, every: float = 30.0,
                 clock: Callable[[], float] | None = None):
        self.total, self.model, self.cache = int(total), model, str(cache)
        self.stream = sys.stderr if stream is None else stream
        self.every, self.clock = every, clock or time.monotonic
        self.done = 0
        self.on = self.total >= REPORTED_FROM
        self.started = self.last_line = self.clock()
        self._bar = None

    def __enter__(self) -> EncodingProgress:  # noqa: PYI034 (no subclasses)
        if self.on:
            self._print(f"encoding {self.total:,} captions with {self.model}: once, then "
                        f"cached in {self.cache}")
            self._bar = progress(total=self.total, desc="encoding captions", unit="caption",
                                 stream=self.stream)
            self._notify(self.status())
        return self

    def status(self, finished: bool = False) -> EncodingStatus:
        elapsed = self.clock() - self.started
        rate = self.done / elapsed if self.done and elapsed > 0 else None
        left = (self.total - self.done) / rate if rate else None
        return EncodingStatus(self.model, self.total, self.done, rate, left, self.cache, finished)

    def update(self, count: int) -> None:
        """``count`` more texts encoded."""
        self.done = min(self.total, self.done + int(count))
        if not self.on:
            return
        if self._bar is not None:
            self._bar.update(count)
        status = self.status()
        now = self.clock()
        if not is_terminal(self.stream) and now - self.last_line >= self.every:
            self.last_line = now
            self._print(status.text())
        self._notify(status)

    def __exit__(self, kind, error, trace) -> None:
        if not self.on:
            return
        if self._bar is not None:
            self._bar.close()
        if kind is None:
            status = self.status(finished=True)
            self._print(f"{status.text()} ({duration(self.clock() - self.started)})")
            self._notify(status)

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    @staticmethod
    def _notify(status: EncodingStatus) -> None:
        with _lock:
            listeners = list(_listeners)
        for listener in listeners:
            listener(status)
