"""The app's candidate queues: built in the background, stored in the annotation database.

A queue (:mod:`app.pair_queue`) is built once per dataset, strategy and *key* (the universe
of caption pairs, the heuristic's settings and, for ``model-disagreement``, the model's
index key) by one worker thread, and stored with :meth:`AnnotationStore.replace_queue`; a
restarted app with the same data and model finds it there and serves it at once. A new
model (a retrained run the app switched to) has a new key, so its queue is built afresh;
the labels, kept per pair, carry over.
"""

from __future__ import annotations

import hashlib
import queue
import threading
import time

import numpy as np

from .annotations_db import AnnotationStore
from .collection import Collection
from .pair_queue import STRATEGIES, QueueBuilder, QueueError, model_scores

DOUBLE_SHARE = 0.1  # the share of queue pairs shown to two annotators (agreement)


class QueueService:
    """Queues of the collections, built on request by one background worker.

    ``engine_of(dataset) -> SearchEngine | None`` gives the model that serves a dataset
    (None when none does yet); its caption languages are the queue's languages.
    """

    def __init__(self, store: AnnotationStore, collections: dict[str, Collection], engine_of,
                 share: float = DOUBLE_SHARE, alpha_n: float = 0.5, alpha_v: float = 0.5,
                 limit: int = 20):
        self.store, self.collections, self.engine_of = store, collections, engine_of
        self.share, self.alpha_n, self.alpha_v, self.limit = share, alpha_n, alpha_v, limit
        self._lock = threading.Lock()
        self._state: dict[tuple[str, str], dict] = {}  # a build: key, since, error
        self._jobs: queue.Queue = queue.Queue()
        self._worker: threading.Thread | None = None
        self._ready: dict[tuple[str, str], str] = {}  # (dataset, strategy) -> stored key

    # ------------------------------------------------------------ keys
    def languages(self, dataset: str) -> list[str]:
        """The queue's caption languages: the serving model's, else all of the dataset's."""
        collection = self.collections[dataset]
        engine = self.engine_of(dataset)
        if engine is None:
            return list(collection.languages)
        return [lang for lang in collection.languages if lang in engine.train_langs]

    def key(self, dataset: str, strategy: str) -> str | None:
        """What the queue depends on, hashed; None for a model queue without a model."""
        collection = self.collections[dataset]
        parts = [strategy, ",".join(self.languages(dataset)), str(self.alpha_n),
                 str(self.alpha_v), str(self.limit), str(len(collection.captions)),
                 "|".join(collection.captions["caption_id"].iloc[[0, -1]])]
        if strategy == "model-disagreement":
            engine = self.engine_of(dataset)
            if engine is None:
                return None
            parts.append(str(engine.index.key or id(engine)))
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]

    # ----------------------------------------------------------- status
    def ensure(self, dataset: str, strategy: str) -> tuple[bool, str]:
        """Whether the queue is ready to serve; if not, a build is started (unless one runs)
        and the second value says what is happening."""
        if strategy not in STRATEGIES:
            raise QueueError(f"unknown queue {strategy!r}; choose one of {list(STRATEGIES)}")
        key = self.key(dataset, strategy)
        if key is None:
            return False, (f"The {strategy} queue needs the model that serves {dataset}, "
                           "which is not ready yet (it is training, or this dataset is only "
                           "offered for annotation)")
        if self._ready.get((dataset, strategy)) == key:
            return True, ""
        info = self.store.queue_info(dataset, strategy)
        if info is not None and info["key"] == key and info["share"] == self.share:
            self._ready[dataset, strategy] = key
            return True, ""
        with self._lock:
            state = self._state.get((dataset, strategy))
            if state is not None and state["key"] == key and state["error"]:
                return False, f"The {strategy} queue could not be built: {state['error']}"
            if state is None or state["key"] != key:
                state = {"key": key, "since": time.monotonic(), "error": ""}
                self._state[dataset, strategy] = state
                self._jobs.put((dataset, strategy, key))
                self._start_worker()
        waited = time.monotonic() - state["since"]
        return False, (f"The {strategy} queue of {dataset} is being built ({waited:.0f} s so "
                       "far; about a minute on the sample)")

    def prepare(self, dataset: str) -> None:
        """Start building the heuristic queue, and the model queue when a model serves."""
        for strategy in ("heuristic", "model-disagreement"):
            if self.key(dataset, strategy) is not None:
                self.ensure(dataset, strategy)

    def wait(self, dataset: str, strategy: str, timeout: float = 120.0) -> None:
        """Block until the queue is ready (tests, benchmarks); an error when it fails."""
        deadline = time.monotonic() + timeout
        while True:
            ready, message = self.ensure(dataset, strategy)
            if ready:
                return
            if "could not be built" in message or time.monotonic() > deadline:
                raise QueueError(message)
            time.sleep(0.05)

    # ------------------------------------------------------------ build
    def _start_worker(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._work, name="queues", daemon=True)
            self._worker.start()

    def _work(self) -> None:
        while True:
            try:
                dataset, strategy, key = self._jobs.get(timeout=5.0)
            except queue.Empty:
                with self._lock:
                    if self._jobs.empty():
                        self._worker = None
                        return
                continue
            try:
                self.build(dataset, strategy, key)
                with self._lock:
                    self._state.pop((dataset, strategy), None)
            except Exception as error:  # noqa: BLE001 -- shown on the page, the server goes on
                with self._lock:
                    self._state[dataset, strategy] = {
                        "key": key, "since": time.monotonic(),
                        "error": f"{type(error).__name__}: {error}"}

    def build(self, dataset: str, strategy: str, key: str) -> int:
        """Build the queue now and store it; returns its length."""
        collection = self.collections[dataset]
        builder = QueueBuilder(collection, self.languages(dataset), self.alpha_n, self.alpha_v,
                               self.limit)
        if strategy == "heuristic":
            pairs = builder.heuristic()
        elif strategy == "random":
            pairs = builder.random()
        else:
            engine = self.engine_of(dataset)
            if engine is None:
                raise QueueError("the model is gone")
            pairs = builder.model_disagreement(*model_scores(engine, builder))
        captions = collection.captions
        ids, langs = captions["caption_id"].to_numpy(), captions["lang"].to_numpy()
        value = [None if np.isnan(v) else float(v) for v in pairs.value]
        rows = list(zip(ids[pairs.a].tolist(), ids[pairs.b].tolist(), langs[pairs.a].tolist(),
                        langs[pairs.b].tolist(), value, pairs.heuristic.tolist(),
                        pairs.model_rank.tolist(), strict=True))
        size = self.store.replace_queue(dataset, strategy, rows, key, self.share)
        self._ready[dataset, strategy] = key
        return size
