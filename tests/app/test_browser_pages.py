"""The app as annotators and first-time searchers see it, at a phone (390x844) and a laptop
(1366x768) viewport: Debian Chromium driven by Playwright (``pytest -m browser``).

Every test runs at both sizes and asserts what is on the page and where (element boxes
against the viewport), waiting only on conditions the page signals (``tests/app/test_browser.py``
says how long it waits at most). Screenshots go to each test's tmp_path, and also to the folder
``$RUDDER_SCREENSHOTS`` when it is set (the README's come from there).
"""

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from . import test_browser as tb

pytestmark = [
    pytest.mark.browser,
    pytest.mark.filterwarnings("ignore:.*(no_silent_downcasting|copy keyword).*"),
]

VIEWPORTS = {"phone": (390, 844), "laptop": (1366, 768)}


@pytest.fixture(params=list(VIEWPORTS))
def size(request):
    return request.param


def open_page(browser, url, size, path=""):
    """A page of a fresh browser context at viewport ``size``, loaded at ``url + path``."""
    page = tb.new_page(browser, *VIEWPORTS[size])
    page.rudder_errors = []
    page.on("pageerror", lambda error: page.rudder_errors.append(str(error)))
    page.goto(url + path, wait_until="domcontentloaded")
    page.wait_for_selector("#search-query textarea")
    return page


@pytest.fixture
def page(browser, served, size):
    page = open_page(browser, served[0], size)
    yield page
    page.context.close()
    assert page.rudder_errors == []


def shot(page, tmp_path, name, size):
    page.evaluate("document.fonts.ready")
    path = tmp_path / f"{name}-{size}.png"
    page.screenshot(path=str(path))
    if os.environ.get("RUDDER_SCREENSHOTS"):
        folder = Path(os.environ["RUDDER_SCREENSHOTS"])
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, folder / path.name)
    return path


def box(page, selector):
    found = page.locator(selector).first.bounding_box()
    assert found is not None, f"{selector} is not on the page"
    return found


def in_view(page, selector):
    """The element's box lies inside the viewport (no scrolling needed to see it)."""
    width, height = page.viewport_size["width"], page.viewport_size["height"]
    b = box(page, selector)
    inside = b["x"] >= 0 and b["y"] >= 0
    return inside and b["x"] + b["width"] <= width + 1 and b["y"] + b["height"] <= height + 1


def status_text(page, *parts):
    condition = " && ".join(f"t.includes({json.dumps(p)})" for p in parts)
    page.wait_for_function(
        f"(() => {{ const t = document.querySelector('#search-status').innerText; "
        f"return {condition}; }})()"
    )
    return page.locator("#search-status").inner_text()


def url_params(page) -> dict:
    return page.evaluate("Object.fromEntries(new URL(window.location.href).searchParams)")


# ------------------------------------------------------------------ search: first visit
def test_header_examples_and_the_cross_lingual_example(page, size, tmp_path):
    header = page.locator("#rudder-header").inner_text()
    for text in ("Dataset", "app-test: 30 videos, 150 captions",
                 "English, Hindi, Marathi, Tamil, Telugu", "audio (mr)",
                 "Model", "random loss (test)"):
        assert text in header
    assert "audio@mr" not in header
    assert page.locator("#rudder-notice").count() == 0  # this dataset is not simulated
    assert "e.g. " in page.locator("#search-query textarea").get_attribute("placeholder")
    examples = page.locator(".rudder-example")
    page.locator("#search-example-5").wait_for()  # the sixth and last example is drawn
    labels = [examples.nth(i).inner_text() for i in range(examples.count())]
    assert [label.split(":")[0] for label in labels] == [
        "Marathi", "Hindi", "Tamil", "Telugu", "English", "Marathi → English"
    ]
    for i in range(len(labels)):
        b = box(page, f"#search-example-{i}")
        assert in_view(page, f"#search-example-{i}") or size == "phone", (i, b)
        assert b["x"] + b["width"] <= VIEWPORTS[size][0]  # wrapped, never off to the side
    page.locator("#search-example-5").click()
    status = status_text(page, "Marathi", "Click a row")
    rows = tb.wait_rows(page, 10)
    assert {row[3] for row in rows} == {"en"}, rows  # a Marathi query, English captions
    query = labels[5].split(": ", 1)[1]
    assert page.locator("#search-query textarea").input_value() == query
    assert url_params(page) == {"q": query}, url_params(page)  # defaults are left out
    assert "⚠" not in status, status
    shot(page, tmp_path, "search-example", size)


def test_a_shared_url_runs_its_search(browser, served, size, tmp_path):
    page = open_page(browser, served[0], size, "?q=%E0%A4%95%E0%A4%BE%E0%A4%97%E0%A4%A6"
                     "+%E0%A4%A6%E0%A5%81%E0%A4%AE%E0%A4%A1%E0%A4%BE&display=hi&k=4")
    try:
        status_text(page, "Marathi")
        rows = tb.wait_rows(page, 4)
        assert len(rows) == 4 and {row[3] for row in rows} == {"hi"}
        assert page.locator("#search-query textarea").input_value() == "कागद दुमडा"
        assert "Hindi" in page.locator("#search-display input").input_value()
        tb.choose(page, "search-display", "Tamil (ta)")
        page.wait_for_function("new URL(location.href).searchParams.get('display') === 'ta'")
        assert url_params(page) == {"q": "कागद दुमडा", "display": "ta", "k": "4"}
    finally:
        page.context.close()


@pytest.mark.parametrize(
    "query, expected",
    [
        ("🙂🎉 !!! ???", "Nothing to search for: the query has no letters"),
        ("折纸船怎么做", "a script this model does not read"),
        ("fold the paper. " * 320, "only its first 300 were searched"),
    ],
    ids=["emoji", "chinese", "long"],
)
def test_queries_that_cannot_be_searched_as_typed_say_why(page, size, tmp_path, query, expected):
    page.locator("#search-query textarea").fill(query)
    page.locator("#search-button").click()
    status = status_text(page, expected)
    assert in_view(page, "#search-status") or size == "phone"
    if "only its first" in expected:
        assert "queries are limited to 300 characters" in status
        assert len(tb.wait_rows(page, 10)) == 10  # searched, with the cut query
    else:
        tb.settled(page)  # the search answered: its message is there, rows would be too
        assert tb.table_rows(page) == []
        assert "Han" in status or "emoji" in status
    shot(page, tmp_path, f"message-{query[:4].strip()}", size)


# -------------------------------------------------------------------- results and player
def click_result(page, video_id):
    page.locator("#search-results [data-col='2']", has_text=video_id).first.click()
    page.wait_for_function(
        f"(document.querySelector('#search-player h4') || {{}}).innerText === {video_id!r}"
    )


def video_state(page, selector="#search-player video"):
    return page.evaluate(
        f"(() => {{ const v = document.querySelector({selector!r}); return v && "
        "{src: v.getAttribute('src'), t: v.currentTime, ready: v.readyState, "
        "paused: v.paused}; })()"
    )


def test_a_clicked_row_plays_its_segment_beside_the_results(page, size, tmp_path):
    tb.search(page, "fold the paper")
    rows = tb.wait_rows(page, 10)
    target = next(row for row in rows if row[1] not in ("v002", "v004"))
    click_result(page, target[1])
    start, end = (float(x) for x in target[4].split("–"))
    state = video_state(page)
    assert state["src"].endswith(f".mp4#t={start:.2f},{end:.2f}")
    page.wait_for_function(
        "document.querySelector('#search-player video').readyState >= 1"
    )
    assert abs(video_state(page)["t"] - start) < 0.6
    assert page.locator("#search-pick input").input_value().endswith(target[1])
    table, player = box(page, "#search-results"), box(page, "#search-player video")
    if size == "laptop":  # beside the results, compact, in view
        assert player["x"] >= table["x"] + table["width"] - 1
        assert player["height"] <= 230 and player["y"] < VIEWPORTS[size][1]
    else:  # stacked under the results on a phone, as wide as the screen
        assert player["y"] >= table["y"] + table["height"] - 1
        assert player["width"] <= VIEWPORTS[size][0]
    # A caption of the playing video seeks it to that caption's segment.
    page.evaluate("document.querySelector('#search-player video').currentTime = 9")
    page.wait_for_function("document.querySelector('#search-player video').currentTime > 8")
    row = page.locator("#search-player tr[data-start]").last
    row.scroll_into_view_if_needed()
    row.click()
    page.wait_for_function(
        "document.querySelector('#search-player video').currentTime < 8"
    )
    assert abs(video_state(page)["t"] - start) < 1.0
    assert "chosen" in row.get_attribute("class")
    shot(page, tmp_path, "player", size)


def test_results_show_thumbnails_of_their_segments(page, size, tmp_path):
    tb.search(page, "fold the paper")
    tb.wait_rows(page, 5)
    page.wait_for_function(
        "Array.from(document.querySelectorAll('#search-results img'))"
        ".some((i) => i.complete && i.naturalWidth === 160)"
    )
    first = page.locator("#search-results img").first
    b = first.bounding_box()
    assert b["width"] <= 96 and b["height"] > 10
    assert "/thumbnails/" in first.get_attribute("src")
    header = page.locator("#search-results thead th").first.inner_text()
    assert header.strip() == "thumbnail"
    shot(page, tmp_path, "thumbnails", size)


# ------------------------------------------------------------------------ annotation
def open_annotation(page, annotator, order=None):
    page.locator("button[role=tab]", has_text="Annotate").click()
    tb.settled(page)
    field = page.locator("#ann-annotator textarea")
    field.fill(annotator)
    field.press("Tab")  # leaving the field stores the (normalised) name
    if order is not None:
        tb.choose(page, "ann-order", order)
    page.locator("#ann-next").click()
    page.wait_for_function("document.querySelector('#ann-candidate-id textarea').value !== ''")


LABEL_BUTTONS = ("ann-positive", "ann-partial", "ann-description", "ann-negative", "ann-skip",
                 "ann-undo")


def test_label_buttons_and_their_definitions_stay_in_view(page, size, tmp_path):
    open_annotation(page, f"layout-{size}", "query by query")  # v000-mr: a video
    page.wait_for_selector("#ann-query video")
    for scroll in ("top", "bottom"):
        at = ("window.scrollY === 0" if scroll == "top" else
              "window.scrollY + window.innerHeight >= document.documentElement.scrollHeight - 1")
        page.evaluate(
            "window.scrollTo(0, 0)" if scroll == "top"
            else "window.scrollTo(0, document.body.scrollHeight)"
        )
        page.wait_for_function(at)
        for elem_id in (*LABEL_BUTTONS, "ann-definitions"):
            assert in_view(page, f"#{elem_id}"), f"{elem_id} out of view ({scroll}, {size})"
    definitions = box(page, "#ann-definitions")
    buttons = box(page, "#ann-positive")
    assert 0 <= buttons["y"] - (definitions["y"] + definitions["height"]) < 40  # just above
    text = page.locator("#ann-definitions").inner_text()
    from app.annotate_layout import DEFINITIONS

    for name, definition in DEFINITIONS.items():
        assert name.capitalize() in text and definition in text
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, tmp_path, "annotate", size)


def test_the_annotation_cards_play_both_segments(page, size, served, tmp_path):
    open_annotation(page, f"segments-{size}", "query by query")  # v000-mr, v015-mr: videos
    page.wait_for_selector("#ann-candidate video")
    demo = served[2]
    collection = demo.rudder_collection
    for role in ("query", "candidate"):
        caption_id = page.locator(f"#ann-{role}-id textarea").input_value()
        caption = collection.caption(caption_id)
        src = page.locator(f"#ann-{role} video").get_attribute("src")
        assert src.endswith(
            f"/{caption['video_id']}.mp4#t={caption['start']:.2f},{caption['end']:.2f}"
        )
        video = box(page, f"#ann-{role} video")
        assert video["height"] <= 170 and video["x"] + video["width"] <= VIEWPORTS[size][0]
    query, candidate = box(page, "#ann-query"), box(page, "#ann-candidate")
    if size == "laptop":  # side by side
        assert abs(query["y"] - candidate["y"]) < 5 and candidate["x"] > query["x"]
    else:  # stacked
        assert candidate["y"] >= query["y"] + query["height"] - 1


def labels_of(db_path, annotator):
    with sqlite3.connect(db_path) as db:
        return db.execute(
            "SELECT caption_id_a, caption_id_b, label, undone FROM labels WHERE annotator = ?"
            " ORDER BY id",
            (annotator,),
        ).fetchall()


def test_typing_never_labels_and_the_name_is_normalised_and_remembered(
    browser, served, size, tmp_path
):
    page = open_page(browser, served[0], size)
    try:
        name = f"Typist {size.upper()}"
        open_annotation(page, f"  {name}  ")
        assert page.locator("#ann-annotator textarea").input_value() == name.casefold()
        candidate = page.locator("#ann-candidate-id textarea").input_value()
        shown = page.evaluate(tb.PAIR_JS)
        for field in ("#ann-find-text textarea", "#ann-annotator textarea"):
            page.locator(field).click()
            for key in ("1", "p", "2", "4", "n", "u", "s"):
                page.keyboard.press(key)
        tb.settled(page)  # a key that sent an event would have its answer by now
        assert labels_of(served[1], name.casefold()) == []
        assert page.locator("#ann-candidate-id textarea").input_value() == candidate
        # Outside a text field the same key labels.
        page.locator("#ann-annotator textarea").fill(name)
        page.locator("#ann-annotator textarea").press("Tab")
        page.locator("#ann-query .rudder-text").click()
        page.keyboard.press("1")
        page.wait_for_function(f"({tb.PAIR_JS}) !== {shown!r}")  # the next pair
        assert [row[1:3] for row in labels_of(served[1], name.casefold())] == [(candidate, 2)]
        page.reload(wait_until="domcontentloaded")
        page.wait_for_selector("#search-query textarea")
        page.locator("button[role=tab]", has_text="Annotate").click()
        page.wait_for_function(
            f"document.querySelector('#ann-annotator textarea').value === {name.casefold()!r}"
        )
    finally:
        page.context.close()


def test_undo_undoes_only_this_tabs_label(browser, served, size, tmp_path):
    first = open_page(browser, served[0], size)
    second = first.context.new_page()  # same browser, same remembered name
    second.goto(served[0], wait_until="domcontentloaded")
    second.wait_for_selector("#search-query textarea")
    name = f"twin-{size}"
    try:
        labelled = []
        for tab, button in ((first, "#ann-positive"), (second, "#ann-negative")):
            open_annotation(tab, name)
            pair = tuple(
                tab.locator(f"#ann-{role}-id textarea").input_value()
                for role in ("query", "candidate")
            )
            tab.locator(button).click()
            tab.wait_for_function(f"({tb.PAIR_JS}) !== {' / '.join(pair)!r}")  # the next pair
            labelled.append(pair)
        assert labelled[0] != labelled[1]
        first.locator("#ann-undo").click()  # the first tab's label, although the second's is newer
        first.wait_for_function(
            "document.querySelector('#ann-progress').innerText.includes('Undid positive')"
        )
        rows = labels_of(served[1], name)
        assert rows == [(*labelled[0], 2, 1), (*labelled[1], 0, 0)]
        first.locator("#ann-undo").click()
        first.wait_for_function(
            "document.querySelector('#ann-progress').innerText.includes('Nothing to undo in "
            "this tab')"
        )
        assert labels_of(served[1], name)[1][3] == 0
    finally:
        first.context.close()


# ---------------------------------------------------------------------------- results tab
def test_results_tab_shows_metrics_per_language_and_a_panel_per_loss(page, served, size,
                                                                     request):
    runs = served[1].parent / "runs"
    for name, loss, per_language in (
        ("20240301-000000-ce-mm", "mm", {"mr": {"R1": 7.5, "R10": 41.0}, "ta": {"R1": 2.5}}),
        ("20240302-000000-ce-po", "po", {}),
    ):
        run = runs / name
        run.mkdir(parents=True, exist_ok=True)
        # the served app is shared by the session's tests: leave its runs folder as found
        request.addfinalizer(lambda run=run: shutil.rmtree(run, ignore_errors=True))
        (run / "config.yaml").write_text(f"data:\n  dataset: sample\nloss:\n  name: {loss}\n")
        test = {"t2v": {"R1": 5.0, "R5": 20.0, "R10": 40.0, "R50": 80.0}}
        if per_language:
            test["per_language"] = per_language
        (run / "metrics.json").write_text(json.dumps({"test": test}))
        (run / "metrics.jsonl").write_text(
            json.dumps({"epoch": 1, "train_loss": 0.7 if loss == "mm" else 7.0,
                        "t2v": {"R10": 30.0}}) + "\n"
        )
    page.locator("button[role=tab]", has_text="Results").click()
    page.locator("#results-refresh").click()
    page.wait_for_function(
        "document.querySelector('#results-languages').innerText.includes('7.5')"
    )
    languages = tb.table_rows(page, "results-languages")
    assert ["20240301-000000-ce-mm", "mm", "mr", "7.5"] == languages[0][:4]
    assert [row[2] for row in languages] == ["mr", "ta"]
    page.wait_for_selector("#results-plot-loss img, #results-plot-loss svg, "
                           "#results-plot-loss canvas")


# ------------------------------------------------------------- first start, simulated data
@pytest.fixture
def served_training(tmp_path, app_dataset):
    """The app on a copy of the test dataset marked simulated, served before its model exists
    (a :class:`ModelSlot` to fill): yields (url, slot, demo)."""
    from app.model_slot import ModelSlot
    from app.ui import build_app, launch_app

    from .conftest import free_port

    tmp = tmp_path / "training"
    root = tmp / "simulated"
    shutil.copytree(app_dataset.root, root)
    meta = json.loads((root / "rudder.json").read_text(encoding="utf-8"))
    (root / "rudder.json").write_text(json.dumps({**meta, "simulated": True}), encoding="utf-8")
    from rudder.data.layout import DatasetFolder

    run_dir = tmp / "runs" / "quick"
    run_dir.mkdir(parents=True)
    slot = ModelSlot(run_dir=run_dir, epochs=2)
    demo = build_app(None, None, DatasetFolder(root), db_path=tmp / "l.sqlite",
                     runs_dir=tmp / "runs", pending=slot)
    launch_app(demo, port=free_port(), prevent_thread_lock=True, quiet=True)
    yield demo.local_url, slot, demo, run_dir
    demo.close()


def test_first_start_serves_the_page_says_a_model_is_training_then_searches(
    browser, served_training, model_and_vocab, size, tmp_path
):
    from app.engine import SearchEngine

    url, slot, demo, run_dir = served_training
    page = open_page(browser, url, size)
    try:
        notice = page.locator("#rudder-notice").inner_text()
        assert "Simulated data" in notice and "no real videos are behind them" in notice
        assert in_view(page, "#rudder-notice")
        page.wait_for_function(
            "document.querySelector('#rudder-training').innerText.includes("
            "'A first model is training')"
        )
        assert page.locator("#rudder-training-bar").get_attribute("max") == "3"
        (run_dir / "metrics.jsonl").write_text(json.dumps({"epoch": 1, "t2v": {}}) + "\n")
        page.wait_for_function(
            "document.querySelector('#rudder-training').innerText"
            ".includes('1 of at most 2 epochs')"
        )
        assert page.locator("#rudder-training-bar").get_attribute("value") == "1"
        tb.search(page, "fold the paper")
        status_text(page, "A first model is training")
        assert "Model a first model is training" in page.locator("#rudder-header").inner_text()
        shot(page, tmp_path, "training", size)
        model, vocab = model_and_vocab
        page.evaluate("window.__rudderSamePage = true")  # gone if the page reloads
        slot.fill(SearchEngine(model, vocab, demo.rudder_collection,
                               cache_dir=tmp_path / "index"),
                  "Collaborative Experts with the mm loss (filled by the test)")
        page.wait_for_function(
            "document.querySelector('#rudder-header').innerText.includes('filled by the test')"
        )
        assert page.evaluate("window.__rudderSamePage") is True  # noticed without a reload
        assert page.locator("#rudder-training").is_hidden()
        page.locator("#search-button").click()  # the same page, not reloaded, now searches
        status_text(page, "English", "Click a row")
        assert len(tb.wait_rows(page, 10)) == 10
    finally:
        page.context.close()
