"""Media files browsers cannot play (AVI with MPEG-4 Part 2, MPEG-TS) play in the app through
their H.264/AAC copies: in Debian Chromium the player reaches the caption's segment and plays
on (``pytest -m browser``); the server sends every file with its video MIME type."""

import urllib.parse
import urllib.request

import numpy as np
import pytest

pytest.importorskip("av")

from rudder.data.card import Card
from rudder.data.layout import DatasetFolder, ExpertInfo

from ..factories import caption, write_dataset
from . import test_browser as tb
from .conftest import free_port, random_model
from .videos import write_video

pytestmark = pytest.mark.filterwarnings("ignore:.*(no_silent_downcasting|copy keyword).*")
CLIPS = {"avi_clip": ".avi", "ts_clip": ".ts", "mp4_clip": ".mp4"}
START, END = 5.0, 9.0  # the captioned segment of every clip (its blue half)


@pytest.fixture(scope="module")
def playback_app(tmp_path_factory):
    """The app over three clips (AVI, TS, MP4) with one segment caption each, served."""
    from app.ui import build_app, launch_app

    root = tmp_path_factory.mktemp("playback-app")
    media = root / "media"
    media.mkdir()
    for video_id, suffix in CLIPS.items():
        write_video(media / f"{video_id}{suffix}")
    ids = list(CLIPS)
    rows = [caption(f"{v}-en", v, "en", f"fold the paper in the {v.split('_')[0]} clip",
                    start=START, end=END) for v in ids]
    rng = np.random.default_rng(0)
    features = {"scene": (ExpertInfo(16), ids, rng.normal(size=(len(ids), 16)))}
    write_dataset(root / "data", dict(zip(ids, ["train", "validation", "test"], strict=True)),
                  rows, features, languages=("en",), name="playback", card=Card("P", "clips"))
    folder = DatasetFolder(root / "data")
    model, vocab = random_model(folder, langs=("en",))
    demo = build_app(model, vocab, folder, db_path=root / "labels.sqlite", runs_dir=root / "runs",
                     media_dir=media, cache_dir=root / "index", thumbnail_dir=root / "thumbs",
                     playback_dir=root / "playback", translator=lambda *a: "")
    launch_app(demo, port=free_port(), prevent_thread_lock=True, quiet=True)
    yield demo.local_url, media, root / "playback", demo
    demo.close()


def served_type(url: str, path) -> str:
    address = url + "gradio_api/file=" + urllib.parse.quote(str(path), safe="/")
    with urllib.request.urlopen(address, timeout=30) as response:
        return response.headers["content-type"]


@pytest.mark.slow
def test_every_file_is_sent_with_its_video_type(playback_app):
    url, media, copies, demo = playback_app
    assert served_type(url, media / "ts_clip.ts") == "video/mp2t"
    assert served_type(url, media / "avi_clip.avi") == "video/x-msvideo"
    assert served_type(url, media / "mp4_clip.mp4") == "video/mp4"
    copy = demo.rudder_collection.playback.wait(media / "ts_clip.ts", timeout=60).path
    assert copy.parent == copies.resolve() and served_type(url, copy) == "video/mp4"


@pytest.mark.browser
@pytest.mark.parametrize("video_id", ["avi_clip", "ts_clip"])
def test_a_file_browsers_cannot_play_plays_its_segment(browser, playback_app, video_id):
    url = playback_app[0]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(60_000)
    page = context.new_page()
    try:
        page.goto(url, wait_until="domcontentloaded")
        page.wait_for_selector("#search-query textarea")
        tb.search(page, "fold the paper")
        tb.wait_rows(page, 3)
        page.locator("#search-results [data-col='2']", has_text=video_id).first.click()
        page.wait_for_function(
            f"(document.querySelector('#search-player h4') || {{}}).innerText === {video_id!r}")
        src = page.locator("#search-player video").get_attribute("src")
        assert "/playback/" in src and src.endswith(f".mp4#t={START:.2f},{END:.2f}")
        # the copy may still be in the making: the page retries until it loads
        page.wait_for_function(
            "document.querySelector('#search-player video').readyState >= 1", timeout=90_000)
        page.wait_for_function(
            f"Math.abs(document.querySelector('#search-player video').currentTime - {START})"
            " < 0.3")
        assert page.locator("#search-player .rudder-preparing").count() == 0
        page.evaluate("(() => { const v = document.querySelector('#search-player video'); "
                      "v.muted = true; return v.play(); })()")
        page.wait_for_function(
            f"document.querySelector('#search-player video').currentTime > {START + 0.5}")
    finally:
        context.close()
