"""The app in a real browser: Debian Chromium driven by Playwright.

Needs ``scripts/install_browser_deps.sh`` (chromium, chromium-driver, Lohit fonts); run with
``pytest -m browser``. Screenshots go to each test's tmp_path (printed).

Every wait is on a condition the page signals (an element, a value, a text, no request in
flight), never a fixed pause; on a loaded machine a step may take minutes, so the only
time limit is ``TIMEOUT_MS`` (``RUDDER_BROWSER_TIMEOUT_S``, default 300 s), after which a
test gives up waiting for a condition that is not coming.
"""

import os
import re
import sqlite3

import pytest

pytestmark = [
    pytest.mark.browser,
    # Gradio's queue calls pandas APIs that pandas 3 deprecates; not ours to fix.
    pytest.mark.filterwarnings("ignore:.*(no_silent_downcasting|copy keyword).*"),
]

TIMEOUT_MS = 1000 * int(os.environ.get("RUDDER_BROWSER_TIMEOUT_S", "300"))


def new_page(browser, width=1280, height=1000):
    """A page in a fresh browser context whose waits give up after ``TIMEOUT_MS``."""
    context = browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(TIMEOUT_MS)
    return context.new_page()


def settled(page):
    """Wait until no request of the page is in flight (Gradio's events are requests, their
    results streamed): what an event would change has changed. Before typing an annotator
    name: the page's load event fills that field with the browser's remembered name (empty
    in a fresh context), and a late answer would erase what the test typed."""
    page.wait_for_load_state("networkidle")


@pytest.fixture
def page(browser, served):
    """A fresh page on the served app; fails the test on any request leaving the machine."""
    url = served[0]
    page = new_page(browser)
    context = page.context
    outside, dialogs = [], []
    page.on(
        "request",
        lambda request: (
            outside.append(request.url)
            if not request.url.startswith((url, "data:", "blob:"))
            else None
        ),
    )
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("#search-query textarea")
    yield page
    context.close()
    assert outside == [], f"the app reached outside the machine: {outside[:3]}"
    assert dialogs == [], f"a script from the data ran: {dialogs}"


def shot(page, tmp_path, name):
    page.evaluate("document.fonts.ready")
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


def choose(page, elem_id, option):
    """Pick ``option`` in the Gradio dropdown ``elem_id``."""
    page.locator(f"#{elem_id} input").click()
    page.locator("[role=option]", has_text=option).first.click()


# Cell texts row by row; a leading thumbnail column (a media folder) is left out.
ROWS_JS = """(id) => {
  const rows = {};
  const header = document.querySelector(`#${id} thead th`);
  const skip = header && header.innerText.trim() === "thumbnail" ? 1 : 0;
  for (const cell of document.querySelectorAll(`#${id} [data-row][data-col]`)) {
    const r = Number(cell.dataset.row), c = Number(cell.dataset.col) - skip;
    if (c >= 0) (rows[r] = rows[r] || [])[c] = cell.innerText.trim();
  }
  return Object.keys(rows).map(Number).sort((a, b) => a - b).map((r) => rows[r]);
}"""


def table_rows(page, elem_id="search-results") -> list[list[str]]:
    """The body cells of a Gradio dataframe, row by row (whatever element renders them)."""
    return page.evaluate(ROWS_JS, elem_id)


def wait_rows(page, count, elem_id="search-results"):
    page.wait_for_function(f"({ROWS_JS})({elem_id!r}).length >= {count}")
    return table_rows(page, elem_id)


def scroll_rows(page, count, elem_id="search-results"):
    """All ``count`` rows of a virtualised dataframe, collected while scrolling through it."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    wait_rows(page, 1, elem_id)
    seen = {}
    viewport = page.locator(f"#{elem_id} .virtual-table-viewport")
    while True:
        for row in table_rows(page, elem_id):
            seen[int(row[0])] = row
        if len(seen) >= count:
            return [seen[r] for r in sorted(seen)]
        viewport.evaluate("(e) => { e.scrollTop += Math.max(100, e.clientHeight / 2); }")
        try:
            page.wait_for_function(  # the rows after the last one seen are drawn
                f"(last) => ({ROWS_JS})({elem_id!r}).some((row) => Number(row[0]) > last)",
                arg=max(seen),
            )
        except PlaywrightTimeout:
            raise AssertionError(
                f"{len(seen)} of {count} rows drawn; status: "
                f"{page.locator('#search-status').inner_text()!r}") from None


def search(page, query, k=None):
    from playwright.sync_api import expect

    page.locator("#search-query textarea").fill(query)
    if k is not None:
        if not page.locator("#search-k input[type=number]").is_visible():
            page.locator("#search-more").get_by_text("More options").click()  # k lives there
        field = page.locator("#search-k input[type=number]")
        for attempt in range(3):  # a re-render of the opening accordion can undo a fill
            field.fill(str(k))
            field.press("Enter")
            try:  # the search reads the field as the page shows it
                expect(field).to_have_value(str(k), timeout=3000)
                break
            except AssertionError:
                if attempt == 2:
                    raise
    page.locator("#search-button").click()


def test_marathi_query_ranked_then_display_language_switched(page, tmp_path):
    search(page, "कागद दुमडा")
    page.wait_for_function("document.querySelector('#search-status').innerText.includes('Marathi')")
    rows = wait_rows(page, 10)
    assert [int(row[0]) for row in rows] == list(range(1, 11))
    scores = [float(row[5]) for row in rows]
    assert scores == sorted(scores, reverse=True) and {row[3] for row in rows} == {"en"}
    assert "detected from its words and script" in page.locator("#search-status").inner_text()
    shot(page, tmp_path, "search-marathi")

    choose(page, "search-display", "Tamil (ta)")
    page.wait_for_function(
        f"({ROWS_JS})('search-results').every((row) => row[3] === 'ta')"
    )
    tamil_rows = table_rows(page)
    assert [row[1] for row in tamil_rows] == [row[1] for row in rows]  # the same videos
    assert all(re.search("[\u0b80-\u0bff]", row[2]) for row in tamil_rows)  # Tamil script
    assert shot(page, tmp_path, "search-tamil").stat().st_size > 10_000


def test_script_caption_renders_as_text(page, tmp_path, script_caption):
    search(page, "fold the paper", k=30)
    rows = scroll_rows(page, 30)
    assert [int(row[0]) for row in rows] == list(range(1, 31))
    rank, caption = next((row[0], row[2]) for row in rows if row[1] == "v007")
    assert caption == script_caption[1]
    choose(page, "search-pick", f"{rank}. v007")
    page.wait_for_function(
        "document.querySelector('#search-player').innerText.includes('window.__pwned')"
    )
    assert "<img src=x onerror=alert(1)>" in page.locator("#search-player").inner_text()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#search-player script, #search-player img").count() == 0
    sources = page.eval_on_selector_all(
        "#search-results img", "(images) => images.map((i) => i.getAttribute('src'))"
    )  # only thumbnails of decodable videos, none from the data
    assert sources and all(
        "gradio_api/file=" in s and "/thumbnails/" in s and s.endswith(".jpg") for s in sources
    )
    shot(page, tmp_path, "script-as-text")


PAIR_JS = ("['query', 'candidate'].map((r) => "
           "document.querySelector(`#ann-${r}-id textarea`).value).join(' / ')")


def test_three_labels_reach_sqlite(page, tmp_path, served):
    """In the default order (the model-disagreement queue), pair after pair."""
    db_path = served[1]
    page.locator("button[role=tab]", has_text="Annotate").click()
    settled(page)
    page.locator("#ann-annotator textarea").fill("browser-annotator")
    page.locator("#ann-next").click()
    page.wait_for_function("document.querySelector('#ann-candidate-id textarea').value !== ''")
    labelled = []
    for action, code in (("key:1", 2), ("button:ann-partial", 1), ("key:n", 0)):
        query_id, current = page.evaluate(PAIR_JS).split(" / ")
        if action.startswith("key:"):
            page.locator("#ann-query .rudder-text").click()  # outside text fields: keys label
            page.keyboard.press(action[4:])
        else:
            page.locator(f"#{action[7:]}").click()
        page.wait_for_function(f"({PAIR_JS}) !== {query_id + ' / ' + current!r}")
        labelled.append((query_id, current, code))
    page.wait_for_function(
        "document.querySelector('#ann-progress').innerText.includes("
        "'browser-annotator has labelled 3 pairs')")
    shot(page, tmp_path, "annotate")
    with sqlite3.connect(db_path) as db:
        rows = db.execute(
            "SELECT caption_id_a, caption_id_b, label FROM labels "
            "WHERE annotator = 'browser-annotator' AND undone = 0 ORDER BY id"
        ).fetchall()
    assert rows == labelled


def open_annotation(page, annotator="browser-layout"):
    page.locator("button[role=tab]", has_text="Annotate").click()
    settled(page)
    if annotator:
        page.locator("#ann-annotator textarea").fill(annotator)
    page.locator("#ann-next" if annotator else "#ann-random").click()
    page.wait_for_function("document.querySelector('#ann-candidate-id textarea').value !== ''")


def test_label_buttons_stay_over_the_caption_lists(page, tmp_path):
    """The label bar is fixed to the window's bottom (tests/app/test_browser_pages.py checks
    it at phone and laptop sizes); here: at 1280x720 it covers no card and stays in view
    when the caption lists are scrolled to."""
    page.set_viewport_size({"width": 1280, "height": 720})
    open_annotation(page)
    page.wait_for_selector(".rudder-others")
    bar = page.locator("#ann-bar").bounding_box()
    for card in ("#ann-query", "#ann-candidate"):
        box = page.locator(card).bounding_box()
        assert box["y"] + box["height"] <= bar["y"], f"{card} is under the label bar"
    page.locator(".rudder-others").first.scroll_into_view_if_needed()
    for elem_id in ("ann-positive", "ann-partial", "ann-description", "ann-negative", "ann-skip"):
        box = page.locator(f"#{elem_id}").bounding_box()
        assert 0 <= box["y"] and box["y"] + box["height"] <= 720, f"{elem_id} is out of view"
    shot(page, tmp_path, "annotate-buttons")


def test_keyboard_shortcuts_are_listed_on_the_page(page):
    from app.annotate_layout import SHORTCUTS

    page.locator("button[role=tab]", has_text="Annotate").click()
    listed = page.locator("#ann-keys").inner_text()
    for elem_id, keys in SHORTCUTS.items():
        action = elem_id.removeprefix("ann-")
        assert all(key.upper() in listed for key in keys) and action in listed


def test_a_missing_annotator_name_is_one_message(page, tmp_path):
    open_annotation(page, annotator="")
    page.locator("#ann-query .rudder-text").click()
    page.keyboard.press("1")
    page.locator("#ann-positive").click()
    message = "Enter your name in the Annotator field (top left) to label."
    page.wait_for_function(
        f"document.querySelector('#ann-progress').innerText.trim() === {message!r}"
    )
    settled(page)  # both events answered: one message, no error toast
    body = page.locator("body").inner_text()
    assert body.count(message) == 1 and "Error" not in body
    assert page.locator("[data-testid=toast-body]").count() == 0
    shot(page, tmp_path, "annotate-no-name")


def test_error_toast_shows_typed_html_as_text(page, tmp_path):
    typed = "<img src=http://example.invalid/x.png>"
    page.locator("#search-pick input").fill(typed)
    page.locator("#search-pick input").press("Enter")
    toast = page.locator("[data-testid=toast-body]")
    toast.wait_for()
    assert typed in toast.inner_text() and "unknown caption or video id" in toast.inner_text()
    assert toast.locator("img, a").count() == 0
    shot(page, tmp_path, "toast")


def test_two_tabs_of_one_annotator_show_different_pairs(page, browser, served):
    second = new_page(browser)
    second.goto(served[0], wait_until="domcontentloaded")
    second.wait_for_selector("#search-query textarea")
    try:
        pairs = []
        for tab in (page, second):
            open_annotation(tab, annotator="browser-twin")
            pairs.append(
                (
                    tab.locator("#ann-query-id textarea").input_value(),
                    tab.locator("#ann-candidate-id textarea").input_value(),
                )
            )
        assert pairs[0] != pairs[1]
    finally:
        second.context.close()
