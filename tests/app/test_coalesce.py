"""Concurrent calls answered together (app.coalesce) and the engine's batched searches."""

import threading

import pytest
import torch

from app.coalesce import Coalescer
from app.collection import Collection
from app.engine import SearchEngine


def run_threads(call, items):
    """``call(item)`` for every item, each in its own thread, all started together;
    -> item -> result or raised error."""
    out, start = {}, threading.Barrier(len(items))

    def work(item):
        start.wait()
        try:
            out[item] = call(item)
        except Exception as error:  # noqa: BLE001  (the test checks which calls fail)
            out[item] = error

    threads = [threading.Thread(target=work, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return out


class GatedSquares:
    """``run_batch`` of squares whose first batch waits until ``release`` is set."""

    def __init__(self, bad=()):
        self.release, self.entered = threading.Event(), threading.Event()
        self.bad, self.batches = set(bad), []

    def __call__(self, items):
        self.batches.append(list(items))
        if len(self.batches) == 1:
            self.entered.set()
            assert self.release.wait(10)
        if self.bad & set(items):
            raise ValueError(f"bad item in {sorted(items)}")
        return [item * item for item in items]


def test_a_lone_call_runs_at_once_as_a_batch_of_one():
    squares = GatedSquares()
    squares.release.set()
    coalescer = Coalescer(squares, max_batch=8)
    assert coalescer(3) == 9 and coalescer(4) == 16
    assert squares.batches == [[3], [4]]


def behind_a_held_batch(coalescer, squares, items):
    """Call ``coalescer(1)`` and hold its batch until ``items`` have all queued behind it,
    each in its own thread; -> item -> result or error of every call but the first."""
    first = threading.Thread(target=coalescer, args=(1,))
    first.start()
    assert squares.entered.wait(10)  # 1 runs alone; the items arrive while it runs
    out: dict = {}
    waiting = threading.Thread(target=lambda: out.update(run_threads(coalescer, items)))
    waiting.start()
    while len(coalescer._pending) < len(items):
        threading.Event().wait(0.01)
    squares.release.set()
    waiting.join(10)
    first.join(10)
    return out


def test_calls_arriving_during_a_batch_share_the_next_one():
    squares = GatedSquares()
    coalescer = Coalescer(squares, max_batch=8)
    out = behind_a_held_batch(coalescer, squares, [2, 3, 4, 5, 6])
    assert out == {2: 4, 3: 9, 4: 16, 5: 25, 6: 36}
    assert squares.batches[0] == [1] and sorted(squares.batches[1]) == [2, 3, 4, 5, 6]
    assert list(coalescer.batch_sizes) == [1, 5] and not coalescer._busy


def test_max_batch_splits_the_waiting_calls():
    squares = GatedSquares()
    coalescer = Coalescer(squares, max_batch=2)
    out = behind_a_held_batch(coalescer, squares, [2, 3, 4, 5, 6])
    assert out == {2: 4, 3: 9, 4: 16, 5: 25, 6: 36}
    assert list(coalescer.batch_sizes) == [1, 2, 2, 1]


def test_a_bad_item_fails_only_its_own_call():
    squares = GatedSquares(bad={4})
    coalescer = Coalescer(squares, max_batch=8)
    out = behind_a_held_batch(coalescer, squares, [2, 3, 4, 5])
    assert {k: v for k, v in out.items() if k != 4} == {2: 4, 3: 9, 5: 25}
    assert isinstance(out[4], ValueError) and "bad item in [4]" in str(out[4])
    assert sorted(squares.batches[2:]) == [[2], [3], [4], [5]]  # retried one by one


def test_max_batch_must_be_positive():
    with pytest.raises(ValueError, match="max_batch must be at least 1"):
        Coalescer(lambda items: items, max_batch=0)


def test_concurrent_searches_give_the_bits_of_sequential_ones(app_dataset, media_dir,
                                                              model_and_vocab, tmp_path):
    model, vocab = model_and_vocab
    collection = Collection(app_dataset, media_dir)
    engine = SearchEngine(model, vocab, collection, cache_dir=tmp_path)
    queries = [("कागद दुमडा", "mr"), ("fold the paper", "en"), ("कागज़ मोड़िए", "hi"),
               ("paper", "en"), ("कागद", "mr"), ("cut", "en")]
    alone = {q: engine.search(*q, k=30) for q in queries}
    assert list(engine._queries.batch_sizes) == [1] * len(queries)
    gate, release = threading.Event(), threading.Event()
    batched = engine._queries.run_batch

    def held_first(items):  # the first pass waits until the others have queued behind it
        if not gate.is_set():
            gate.set()
            assert release.wait(10)
        return batched(items)

    engine._queries.run_batch = held_first
    out: dict = {}
    first = threading.Thread(target=lambda: out.update({queries[0]: engine.search(*queries[0],
                                                                                  k=30)}))
    first.start()
    assert gate.wait(10)
    rest = threading.Thread(target=lambda: out.update(run_threads(
        lambda q: engine.search(*q, k=30), queries[1:])))
    rest.start()
    while len(engine._queries._pending) < len(queries) - 1:
        threading.Event().wait(0.01)
    release.set()
    rest.join(20)
    first.join(20)
    assert list(engine._queries.batch_sizes)[len(queries):] == [1, len(queries) - 1]
    for query in queries:
        assert [(h.video_id, h.score, h.caption_id) for h in out[query]] == [
            (h.video_id, h.score, h.caption_id) for h in alone[query]], query
    text, logits = engine.embed_texts([queries[3][0]], [queries[3][1]])
    order, top = engine.rank(text, logits, 30)
    assert [h.score for h in out[queries[3]]] == top.tolist()  # the numbers of rank, exactly
    assert torch.equal(order, torch.tensor([engine.index.video_ids.index(h.video_id)
                                            for h in out[queries[3]]]))
