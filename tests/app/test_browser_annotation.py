"""The annotation loop in a real browser (Debian Chromium through Playwright, ``pytest -m
browser``): the candidate queue, the agreement view, and a retrain the app switches to.

Every wait is on something the page shows (a field's value, a status text), never a fixed
sleep. Screenshots go to each test's tmp_path.
"""

import sqlite3

import pytest

from app.annotations_db import AnnotationStore

from . import test_browser as tb

pytestmark = [
    pytest.mark.browser,
    pytest.mark.filterwarnings("ignore:.*(no_silent_downcasting|copy keyword).*"),
]

PAIR_JS = tb.PAIR_JS


def open_page(browser, url, login=None):
    """A fresh page at ``url`` (logged in as ``login``: (user, password)), with errors kept."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    context.set_default_timeout(60_000)  # the machine may be shared and loaded
    page = context.new_page()
    page.rudder_errors = []
    page.on("pageerror", lambda error: page.rudder_errors.append(str(error)))
    page.goto(url, wait_until="domcontentloaded")
    if login is not None:
        page.locator("input[type=password]").wait_for()
        page.locator("input[type=text]:visible").first.fill(login[0])
        page.locator("input[type=password]").fill(login[1])
        page.get_by_role("button", name="Login").click()
    page.wait_for_selector("#search-query textarea", timeout=60_000)
    return page


def text_of(page, elem_id) -> str:
    return page.locator(f"#{elem_id}").inner_text()


def wait_text(page, elem_id, *parts, timeout=60_000):
    """Wait until the element's text holds every one of ``parts``."""
    checks = " && ".join(f"text.includes({part!r})" for part in parts)
    page.wait_for_function(
        f"(() => {{ const e = document.querySelector('#{elem_id}'); "
        f"const text = e ? e.innerText : ''; return {checks}; }})()", timeout=timeout)


def open_annotation(page, annotator=None):
    page.locator("button[role=tab]", has_text="Annotate").click()
    if annotator is not None:
        page.locator("#ann-annotator textarea").fill(annotator)
        page.locator("#ann-annotator textarea").press("Tab")
    page.locator("#ann-next").click()
    page.wait_for_function("document.querySelector('#ann-candidate-id textarea').value !== ''")


def label_with_key(page, key):
    """Press ``key`` outside the text fields; wait for the next pair; returns the labelled one."""
    before = page.evaluate(PAIR_JS)
    page.locator("#ann-query .rudder-text").click()
    page.keyboard.press(key)
    page.wait_for_function(f"({PAIR_JS}) !== {before!r}", timeout=60_000)
    return tuple(before.split(" / "))


def test_the_queue_serves_pairs_with_why_and_follows_the_order_field(browser, served, tmp_path):
    page = open_page(browser, served[0])
    try:
        served[2].rudder_annotate.queues.wait("app-test", "model-disagreement")
        open_annotation(page, "queue-reader")
        wait_text(page, "ann-candidate", "Queue model-disagreement, pair", "the model ranks")
        labelled = [label_with_key(page, "2"), label_with_key(page, "4")]
        wait_text(page, "ann-progress", "Queue model-disagreement", "pairs labelled",
                  "queue-reader has labelled 2 pairs")
        with sqlite3.connect(served[1]) as db:
            rows = db.execute("SELECT caption_id_a, caption_id_b, label FROM labels WHERE"
                              " annotator = 'queue-reader' ORDER BY id").fetchall()
        assert rows == [(*labelled[0], 1), (*labelled[1], 0)]
        queue = AnnotationStore(served[1])
        positions = [queue.queue_row("app-test", "model-disagreement", *pair)["position"]
                     for pair in labelled]
        assert positions == sorted(positions)  # in queue order
        tb.choose(page, "ann-order", "queue: random")
        served[2].rudder_annotate.queues.wait("app-test", "random")
        page.locator("#ann-next").click()
        wait_text(page, "ann-candidate", "Queue random, pair")
        tb.choose(page, "ann-order", "query by query")
        page.locator("#ann-next").click()
        wait_text(page, "ann-candidate", "Candidate ")
        tb.shot(page, tmp_path, "queue")
        assert page.rudder_errors == []
    finally:
        page.context.close()


def test_the_agreement_view_lists_and_opens_disagreements(browser, served, tmp_path):
    store = AnnotationStore(served[1])
    for name, label in (("agree-a", "partial"), ("agree-b", "negative")):
        store.add("app-test", name, "v003-hi", "v020-hi", label)
        store.add("app-test", name, "v003-hi", "v021-hi", "positive")
    page = open_page(browser, served[0])
    try:
        page.locator("button[role=tab]", has_text="Annotate").click()
        page.locator("#ann-annotator textarea").fill("adjudicator")
        page.locator("#ann-agreement-panel").get_by_text("Export and agreement").click()
        tb.choose(page, "ann-scope", "app-test")
        page.locator("#ann-agreement").click()
        wait_text(page, "ann-agreement-summary", "Krippendorff's alpha: ordinal",
                  "pairs with disagreeing labels")
        page.wait_for_function(
            f"({tb.ROWS_JS})('ann-disagreements').some((row) => row[2] === 'v020-hi')")
        rows = tb.table_rows(page, "ann-disagreements")
        assert ["app-test", "v003-hi", "v020-hi", "agree-a: partial, agree-b: negative"] in rows
        assert not any(row[2] == "v021-hi" for row in rows)  # they agree on that one
        annotators = [row[0] for row in tb.table_rows(page, "ann-annotators")]
        assert {"agree-a", "agree-b"} <= set(annotators)
        tb.choose(page, "ann-disagreement-pick", "v003-hi / v020-hi (app-test)")
        wait_text(page, "ann-candidate", "Disagreeing pair",
                  "disagreement: agree-a partial, agree-b negative")
        assert page.evaluate(PAIR_JS) == "v003-hi / v020-hi"
        tb.shot(page, tmp_path, "agreement")
        assert page.rudder_errors == []
    finally:
        page.context.close()


@pytest.fixture
def served_retrain(tmp_path, concept, base_run, monkeypatch):
    """The app over ``concept`` with ``base_run``, logins asha (may retrain) and ravi."""
    from app.auth import Logins
    from app.retrain import RetrainSettings
    from app.ui import build_app, launch_app
    from rudder.evaluation.loading import load_run

    monkeypatch.setenv("RUDDER_CACHE", str(tmp_path / "cache"))  # the switched run's index
    run = load_run(base_run)
    settings = RetrainSettings(dataset=str(concept), runs_dir=tmp_path / "runs",
                               base_run=base_run, permitted=frozenset({"asha"}), logins=True,
                               epochs=1)
    demo = build_app(run.model, run.vocab, run.dataset, db_path=tmp_path / "labels.sqlite",
                     runs_dir=tmp_path / "runs", encode=run.encode_queries,
                     model_key=run.fingerprint, cache_dir=tmp_path / "index",
                     train_langs=run.config.data.caption_langs,
                     description="the base run (test)", retrain=settings)
    logins = Logins()
    logins.add_plain("asha:secret")
    logins.add_plain("ravi:other")
    launch_app(demo, port=tb_port(), auth=logins, prevent_thread_lock=True, quiet=True)
    yield demo
    demo.rudder_retrainer.stop()
    demo.close()


def tb_port():
    from .conftest import free_port

    return free_port()


@pytest.mark.slow
def test_a_retrain_from_the_page_and_the_switch_to_its_run(browser, served_retrain, tmp_path):
    demo = served_retrain
    ravi = open_page(browser, demo.local_url, ("ravi", "other"))
    asha = open_page(browser, demo.local_url, ("asha", "secret"))
    try:
        wait_text(asha, "rudder-header", "the base run (test)")
        demo.rudder_annotate.queues.wait("tiny", "model-disagreement")
        open_annotation(asha)
        assert asha.locator("#ann-annotator textarea").input_value() == "asha"
        labelled = [label_with_key(asha, key) for key in "2422"]
        panel = "Retrain the model on the settled labels"
        for page in (ravi, asha):
            page.locator("button[role=tab]", has_text="Annotate").click()
            page.locator("#ann-retrain-panel").get_by_text(panel).click()
        ravi.locator("#ann-retrain").click()
        wait_text(ravi, "ann-retrain-status", "ravi may not retrain",
                  "python -m heuristics retrain")
        asha.locator("#ann-retrain").click()
        wait_text(asha, "ann-retrain-status", "Retraining")
        wait_text(asha, "ann-retrain-status", "is ready", "4 manual labels", timeout=300_000)
        asha.locator("#ann-switch").click()
        wait_text(asha, "ann-retrain-status", "The app now searches with")
        wait_text(asha, "rudder-header", "retrained on 4 manual labels")
        runs = list((tmp_path / "runs").glob("*-retrained-po"))
        assert len(runs) == 1 and demo.rudder_retrainer.serving == runs[0]
        assert "retrained on 4 manual labels" in demo.rudder_slot.description
        assert len(set(labelled)) == 4
        # search answers with the new model, and the model queue is rebuilt for it
        asha.locator("button[role=tab]", has_text="Search").click()
        tb.search(asha, "fold the paper")
        tb.wait_rows(asha, 5)
        demo.rudder_annotate.queues.wait("tiny", "model-disagreement")
        tb.shot(asha, tmp_path, "switched")
        assert asha.rudder_errors == [] and ravi.rudder_errors == []
    finally:
        ravi.context.close()
        asha.context.close()
