"""Concurrent calls answered together: one batched call for whatever arrived meanwhile.

The app's searches run in Gradio's worker threads. Each one's model pass costs the same for
one query as for a block of them (:mod:`rudder.evaluation.inference` pads every pass to
``BLOCK`` rows, so that a row's numbers never depend on what else is in its block). So the
searches that arrive while a pass runs wait for it to end and then share the next pass:
dynamic batching without a delay (as in TensorFlow Serving's and Triton's dynamic batchers,
here with no batching window, so that a lone query never waits).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class _Slot(Generic[Item, Result]):
    """One call: its item, then its result or error; ``ready`` is set when it is answered
    or made the next leader (``lead``)."""

    def __init__(self, item: Item):
        self.item = item
        self.result: Result | None = None
        self.error: BaseException | None = None
        self.answered = False
        self.lead = False
        self.ready = threading.Event()


class Coalescer(Generic[Item, Result]):
    """``coalescer(item)`` returns ``run_batch([item, ...])``'s answer for ``item``.

    The first caller while no batch runs leads: it runs the batch of every pending item (its
    own included, at most ``max_batch``), answers them, and hands the lead to the oldest
    item still pending, if any. ``run_batch(items)`` returns one result per item, in order.
    When it raises, each item of that batch is run on its own, so that one bad item fails
    only its own call.
    """

    def __init__(self, run_batch: Callable[[list[Item]], Sequence[Result]], max_batch: int):
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self.run_batch, self.max_batch = run_batch, max_batch
        self._lock = threading.Lock()
        self._pending: list[_Slot[Item, Result]] = []
        self._busy = False
        # the sizes of the last 1,000 batches run (tests, benchmarks; bounded in a long-lived app)
        self.batch_sizes: deque[int] = deque(maxlen=1000)

    def __call__(self, item: Item) -> Result:
        slot: _Slot[Item, Result] = _Slot(item)
        with self._lock:
            self._pending.append(slot)
            slot.lead = not self._busy
            self._busy = True
        if not slot.lead:
            slot.ready.wait()
        if slot.lead:
            self._run_batch()
        if slot.error is not None:
            raise slot.error
        return slot.result  # type: ignore[return-value]  # set by the batch that answered it

    def _run_batch(self) -> None:
        with self._lock:
            batch = self._pending[: self.max_batch]
            del self._pending[: self.max_batch]
        try:
            self._answer(batch)
        except BaseException as error:  # e.g. KeyboardInterrupt: no call is left unanswered
            for slot in batch:
                if not slot.answered:
                    slot.error, slot.answered = error, True
            raise
        finally:
            with self._lock:
                following = self._pending[0] if self._pending else None
                if following is None:
                    self._busy = False
                else:
                    following.lead = True
            for slot in batch:
                slot.lead = False
                slot.ready.set()
            if following is not None:
                following.ready.set()

    def _answer(self, batch: list[_Slot[Item, Result]]) -> None:
        self.batch_sizes.append(len(batch))
        try:
            results = list(self.run_batch([slot.item for slot in batch]))
            if len(results) != len(batch):
                raise RuntimeError(f"run_batch gave {len(results)} results for {len(batch)} "
                                   "items")
        except Exception as error:  # noqa: BLE001  (given to the call it belongs to)
            if len(batch) == 1:
                batch[0].error, batch[0].answered = error, True
                return
            for slot in batch:  # one at a time: only a bad item's own call fails
                self._answer([slot])
            return
        for slot, result in zip(batch, results, strict=True):
            slot.result, slot.answered = result, True
