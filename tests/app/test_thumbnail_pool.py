"""Thumbnails are made in a bounded pool: a search never waits for a decoder, a follow-up
event swaps the placeholders for the thumbnails, files with frames over the pixel limit get
none (and are not tried again), and no more than ``workers`` files decode at once."""

import asyncio
import threading
import time

import pytest

pytest.importorskip("av")

import app.thumbnails as thumbnails_module
from app.collection import Collection
from app.engine import SearchEngine
from app.search_tab import SearchTab
from app.thumbnails import Thumbnails

from .videos import write_video


@pytest.fixture
def slow_decoder(monkeypatch):
    """``frame_at`` held until the test releases it; counts calls and concurrent ones."""
    gate, lock = threading.Event(), threading.Lock()
    stats = {"calls": 0, "running": 0, "most": 0}
    real = thumbnails_module.frame_at

    def held(*args, **kwargs):
        with lock:
            stats["calls"] += 1
            stats["running"] += 1
            stats["most"] = max(stats["most"], stats["running"])
        try:
            gate.wait(30)
            return real(*args, **kwargs)
        finally:
            with lock:
                stats["running"] -= 1

    monkeypatch.setattr(thumbnails_module, "frame_at", held)
    return gate, stats


def test_a_search_does_not_wait_for_slow_thumbnails(app_dataset, media_dir, model_and_vocab,
                                                    tmp_path, slow_decoder):
    gate, stats = slow_decoder
    collection = Collection(app_dataset, media_dir)
    model, vocab = model_and_vocab
    engine = SearchEngine(model, vocab, collection, cache_dir=tmp_path / "index")
    thumbs = Thumbnails(tmp_path / "thumbs", workers=2)
    tab = SearchTab(engine, collection=collection, thumbnails=thumbs)
    import gradio  # noqa: F401  (imported by the search: not what is timed)

    began = time.monotonic()
    _, table, _ = tab.search("fold the paper", k=10)
    assert time.monotonic() - began < 10  # the decoders are all held (30 s)
    assert len(table) == 10
    cells = dict(zip(table["video"], table["thumbnail"], strict=True))
    pending = [v for v, c in cells.items() if "preparing the thumbnail" in c]
    assert len(pending) >= 8 and all("/thumbs/placeholder.jpg)" in cells[v] for v in pending)
    time.sleep(0.5)
    assert stats["most"] <= 2  # the pool's bound, whatever the number of results
    gate.set()
    filled = asyncio.run(tab.fill_thumbnails(table))
    assert not isinstance(filled, dict)  # placeholders were swapped
    cells = dict(zip(filled["video"], filled["thumbnail"], strict=True))
    assert all(c.startswith(f"![segment of {v}](gradio_api/file=") and c.endswith(".jpg)")
               for v, c in cells.items() if v not in ("v002", "v004"))
    assert cells.get("v004", "") == "" and cells.get("v002", "") == ""
    assert stats["most"] <= 2
    thumbs.close()


def test_frames_over_the_pixel_limit_get_no_thumbnail_and_are_not_tried_again(
        tmp_path, monkeypatch):
    video = write_video(tmp_path / "big.mp4", size=(64, 48))
    calls = []
    real = thumbnails_module.open_video
    monkeypatch.setattr(thumbnails_module, "open_video",
                        lambda *a, **k: calls.append(a) or real(*a, **k))
    thumbs = Thumbnails(tmp_path / "thumbs", max_pixels=64 * 48 - 1)
    assert thumbs.path(video, 0.0, 5.0) is None
    assert len(calls) == 1  # refused from the header: no second, full decode
    assert thumbs.request(video, 0.0, 5.0) is None and len(calls) == 1  # remembered
    assert Thumbnails(tmp_path / "ok", max_pixels=64 * 48).path(video, 0.0, 5.0) is not None


def test_the_follow_up_skips_when_nothing_is_pending(tmp_path):
    import gradio as gr
    import pandas as pd

    tab = SearchTab.__new__(SearchTab)
    tab.thumbnails = Thumbnails(tmp_path / "thumbs")
    table = pd.DataFrame({"thumbnail": ["", "![segment of a](x.jpg)"], "video": ["a", "b"]})
    assert asyncio.run(tab.fill_thumbnails(table)) == gr.skip()  # the table is left alone


def test_a_job_done_before_its_callback_is_added_does_not_deadlock(tmp_path, monkeypatch):
    """A pool job can end before ``request`` adds its done-callback (a file refused at once);
    the callback then runs in the requesting thread and must not wait for a lock it holds."""
    from concurrent.futures import Future

    video = write_video(tmp_path / "clip.mp4")
    thumbs = Thumbnails(tmp_path / "thumbs", workers=1)
    monkeypatch.setattr(thumbnails_module, "frame_at", lambda *args, **kwargs: None)

    def done_at_once(fn, *args):
        future = Future()
        future.set_result(fn(*args))
        return future

    monkeypatch.setattr(thumbs._pool, "submit", done_at_once)
    answers = []
    asking = threading.Thread(target=lambda: answers.append(thumbs.request(video, 0.0, 1.0)),
                              daemon=True)
    asking.start()
    asking.join(10)
    assert not asking.is_alive(), "request() waited for its own lock"
    assert answers == [None]  # no thumbnail, remembered as failed
    thumbs.close()
