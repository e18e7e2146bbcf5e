"""Every endpoint of the served app through gradio_client, file serving, auth, concurrency."""

import json
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AuthenticationError

from app.__main__ import parse_auth
from app.auth import hash_password
from app.ui import build_app, launch_app

# Gradio's queue calls pandas APIs that pandas 3 deprecates; not ours to fix.
pytestmark = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning:gradio.queueing", "ignore:.*(no_silent_downcasting|copy keyword).*"
)

# Query by query, candidates in the query's language (the Order and Candidate language
# fields); the queue orders are tested in test_queue.py and test_browser_annotation.py.
QUERY = ("same", "query")
ENDPOINTS = {
    "/search",
    "/search_submit",
    "/change_display_language",
    "/play",
    "/play_result",
    "/open_url",
    "/next_unlabelled",
    "/random_query",
    "/find_captions",
    "/open_query",
    "/change_candidate_language",
    "/label_positive",
    "/label_partial",
    "/label_description",
    "/label_negative",
    "/skip",
    "/undo",
    "/export",
    "/agreement",
    "/open_disagreement",
    "/whoami",
    "/list_runs",
    "/plot_runs",
    "/load_runs",
}


def search(
    client, query, lang="auto", display="en", k=10, translate=False, target="en", api="/search"
):
    return client.predict(query, lang, display, k, translate, target, api_name=api)


def test_every_endpoint_is_named(client):
    api = client.view_api(print_info=False, return_format="dict")
    assert set(api["named_endpoints"]) == ENDPOINTS


def test_marathi_query_gives_ranked_videos(client):
    status, table, pick = search(client, "कागद दुमडा", k=8, display="hi")
    player = client.predict(pick["value"], api_name="/play")  # the page's second event
    assert "Marathi" in status and "detected" in status
    rows = [row[1:] for row in table["data"]]  # the served app has a media folder:
    assert table["headers"] == [
        "thumbnail",  # a thumbnail column comes first
        "rank",
        "video",
        "caption",
        "lang",
        "segment (s)",
        "score",
        "experts",
    ]
    assert [r[0] for r in rows] == list(range(1, 9))
    assert [r[5] for r in rows] == sorted((r[5] for r in rows), reverse=True)
    assert {r[3] for r in rows} == {"hi"} and all("scene" in r[6] for r in rows)
    assert pick["value"] == f"{rows[0][1]}-hi" and rows[0][1] in player

    _, same, _ = search(client, "कागद दुमडा", k=8, display="hi", api="/search_submit")
    assert [row[1:] for row in same["data"]] == rows
    _, tamil, _ = search(client, "कागद दुमडा", k=8, display="ta", api="/change_display_language")
    tamil_rows = [row[1:] for row in tamil["data"]]
    assert [r[1] for r in tamil_rows] == [r[1] for r in rows] and {r[3] for r in tamil_rows} == {
        "ta"
    }


def test_results_come_in_one_light_event_and_the_player_after_it(served):
    # The search events return the status, the table and the result choices; the player
    # (of the chosen result) is a second event chained after each, so that the page shows the
    # results as soon as they are ready. Setting the display language (an example or the
    # URL does) must not start a second search: that event listens to user input only.
    config = served[2].get_config_file()
    elem = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
    deps = config["dependencies"]
    results = ["search-status", "search-results", "search-pick"]
    searches = [i for i, d in enumerate(deps) if [elem[o] for o in d["outputs"]][-3:] == results]
    assert {deps[i]["api_name"] for i in searches} >= {
        "search", "search_submit", "change_display_language", "open_url"}
    for i in searches:
        chained = [d for d in deps if d.get("trigger_after") == i]
        assert [[elem[o] for o in d["outputs"]] for d in chained] == [["search-player"]]
    trigger = {d["api_name"]: d["targets"][0][1] for d in deps}
    assert trigger["change_display_language"] == "input"


def test_language_override_and_bad_input(client):
    status, table, _ = search(client, "कागद दुमडा", lang="hi")
    assert "Hindi" in status and "chosen" in status and len(table["data"]) == 10
    status, table, _ = search(client, "   ")
    assert status.startswith("Type a query") and table["data"] in (
        [],
        [[None] * 8],
        [[""] * 8],
    )
    with pytest.raises(Exception, match="fr is not in the list of choices"):
        search(client, "paper", lang="fr")
    status, table, _ = search(client, "fold " * 500)  # capped, not refused
    assert len(table["data"]) == 10


def test_translation_switch(client, translator):
    status, _, _ = search(client, "कागद दुमडा", translate=True, target="en")
    assert "Translated to English" in status and "fold the paper" in status
    assert ("कागद दुमडा", "mr", "en") in translator.calls
    status, table, _ = search(client, "बाटली कापा", translate=True, target="en")
    assert (
        "Translation unavailable" in status
        and "test: offline" in status
        and len(table["data"]) == 10
    )


def test_player_serves_only_the_media_folder(client, served, media_dir, script_caption):
    url, db_path, _ = served
    html = client.predict("v000-mr", api_name="/play")
    assert "<video" in html and "#t=0.00,3.50" in html
    src = html.split("src='")[1].split("'")[0]
    path = unquote(src.split("file=")[1].split("#")[0])
    assert Path(path) == (media_dir / "v000.mp4").resolve()
    response = httpx.get(url + src.split("#")[0])
    assert response.status_code == 200 and response.content == (media_dir / "v000.mp4").read_bytes()
    for secret in (media_dir.parent / "secret.txt", db_path, Path(__file__)):
        assert httpx.get(f"{url}gradio_api/file={secret}").status_code == 403
    assert "No video file for v002" in client.predict("v002-en", api_name="/play")
    escaped = client.predict(script_caption[0], api_name="/play")
    assert (
        "&lt;script&gt;window.__pwned" in escaped
        and "<script" not in escaped
        and "<img" not in escaped
    )
    with pytest.raises(Exception, match="unknown caption or video id"):
        client.predict("nope", api_name="/play")


def view(result):
    query_html, query_id, candidate_html, candidate_id, progress, history, others = result
    return {
        "query": query_id,
        "candidate": candidate_id,
        "progress": progress,
        "history": history["data"],
        "candidate_html": candidate_html,
        "query_html": query_html,
        "others": others,
    }


def test_annotation_flow(client, served):
    db_path = served[1]
    first = view(client.predict("asha", "app-test", *QUERY, api_name="/next_unlabelled"))
    assert first["query"] == "v000-mr" and first["candidate"] == "v015-mr"
    assert "0 of 20" in first["progress"] and "heuristic: positive" in first["candidate_html"]
    pair = ["asha", "app-test", "v000-mr"]
    second = view(client.predict(*pair, "v015-mr", *QUERY, api_name="/label_positive"))
    assert second["query"] == "v000-mr" and second["candidate"] not in ("v015-mr", "")
    third = view(client.predict(*pair, second["candidate"], *QUERY, api_name="/label_partial"))
    fourth = view(client.predict(*pair, third["candidate"], *QUERY, api_name="/label_description"))
    skipped = view(client.predict(*pair, fourth["candidate"], *QUERY, api_name="/skip"))
    assert skipped["candidate"] != fourth["candidate"]
    fifth = view(client.predict(*pair, skipped["candidate"], *QUERY, api_name="/label_negative"))
    assert "4 of 20" in fifth["progress"] and len(fifth["history"]) == 4
    with sqlite3.connect(db_path) as db:
        rows = db.execute(
            "SELECT caption_id_b, label FROM labels WHERE annotator='asha' AND undone=0 ORDER BY id"
        ).fetchall()
    assert rows == [
        ("v015-mr", 2),
        (second["candidate"], 1),
        (third["candidate"], 3),
        (skipped["candidate"], 0),
    ]

    undone = view(client.predict("asha", "app-test", *QUERY, api_name="/undo"))
    assert undone["candidate"] == skipped["candidate"] and "Undid negative" in undone["progress"]
    assert "3 of 20" in undone["progress"]

    found = client.predict("app-test", "होडी", api_name="/find_captions")
    assert found["choices"] and all("होडी" in label for label, _ in found["choices"])
    opened = view(client.predict("asha", "app-test", "v001-mr", "same", api_name="/open_query"))
    assert opened["query"] == "v001-mr" and "होडी" in opened["query_html"]
    assert "Other captions of the query's video v001 (4)" in opened["others"]
    english = view(
        client.predict("asha", "app-test", "v001-mr", "en", "query",
                       api_name="/change_candidate_language")
    )
    assert english["candidate"].endswith("-en")
    rand = view(client.predict("asha", "app-test", "any", "query", api_name="/random_query"))
    assert rand["query"] and rand["candidate"]
    with pytest.raises(Exception, match="no caption 'v999-mr'"):
        client.predict("asha", "app-test", "v000-mr", "v999-mr", *QUERY, api_name="/label_positive")

    client.predict("ravi", "app-test", "v000-mr", "v015-mr", *QUERY, api_name="/label_positive")
    client.predict(
        "ravi", "app-test", "v000-mr", second["candidate"], *QUERY, api_name="/label_negative"
    )
    jsonl, csv_path, report, kappa, status = client.predict("app-test", api_name="/export")
    assert json.loads(Path(report).read_text(encoding="utf-8"))["annotators"] >= 2
    records = [json.loads(line) for line in Path(jsonl).read_text(encoding="utf-8").splitlines()]
    assert {(r["annotator"], r["caption_id_b"], r["label"]) for r in records} >= {
        ("asha", "v015-mr", "positive"),
        ("ravi", second["candidate"], "negative"),
    }
    assert (
        Path(csv_path)
        .read_text(encoding="utf-8")
        .startswith("caption_id_a,caption_id_b,label,annotator,time,dataset")
    )
    # Other tests (the browser ones) may label on the same served app: find our pair.
    assert ["asha", "ravi", 2] in [row[:3] for row in kappa["data"]] and "Exported" in status
    everything, summary, per_annotator, disagreements, pick = client.predict(
        "(all datasets)", api_name="/agreement")
    assert ["asha", "ravi", 2] in [row[:3] for row in everything["data"]]
    assert "Krippendorff's alpha" in summary and per_annotator["data"]
    # asha and ravi disagree on the second candidate: it is listed, and opens
    assert ["app-test", "v000-mr", second["candidate"]] in [
        row[:3] for row in disagreements["data"]]
    value = next(v for _, v in pick["choices"] if v.endswith(second["candidate"]))
    opened = view(client.predict("mina", "app-test", value, api_name="/open_disagreement"))
    assert (opened["query"], opened["candidate"]) == ("v000-mr", second["candidate"])


def test_results_endpoints(client, served, request):
    runs_dir = served[1].parent / "runs"
    run = runs_dir / "20240101-000000-ce-mm"
    run.mkdir(parents=True, exist_ok=True)
    # the served app is shared by the session's tests: leave its runs folder as found
    request.addfinalizer(lambda: shutil.rmtree(run, ignore_errors=True))
    per_language = {"mr": {"R1": 6.0, "R10": 44.0}, "ta": {"R1": 2.0, "R10": 21.0}}
    (run / "metrics.json").write_text(
        json.dumps(
            {
                "test": {
                    "t2v": {"R1": 5.0, "R5": 20.0, "R10": 40.0, "R50": 80.0},
                    "per_language": per_language,
                }
            }
        )
    )
    (run / "metrics.jsonl").write_text(
        json.dumps({"epoch": 1, "train_loss": 0.7, "t2v": {"R10": 30.0}}) + "\n"
    )
    for api in ("/list_runs", "/load_runs"):
        table, languages, chosen = client.predict(api_name=api)
        assert table["data"][0][0] == "20240101-000000-ce-mm" and chosen["value"] == [
            "20240101-000000-ce-mm"
        ]
        assert [row[2:4] + row[5:6] for row in languages["data"]] == [
            ["mr", 6.0, 44.0],
            ["ta", 2.0, 21.0],
        ]
    plots = client.predict(["20240101-000000-ce-mm"], api_name="/plot_runs")
    assert len(plots) == 3 and all(p for p in plots)


def test_whoami_without_login_is_the_name_the_browser_remembered(client):
    assert client.predict("", api_name="/whoami")["value"] == ""
    assert client.predict("  Asha  Rao ", api_name="/whoami")["value"] == "asha rao"


def label_many(client, annotator, pairs, errors):
    try:
        for i, (query, candidate) in enumerate(pairs):
            api = ("/label_positive", "/label_partial", "/label_description", "/label_negative")[
                i % 4
            ]
            client.predict(annotator, "app-test", query, candidate, "any", "query", api_name=api)
    except Exception as error:  # noqa: BLE001  (a thread's failure, surfaced by the test)
        errors.append(error)


@pytest.mark.parametrize("count", [25, pytest.param(200, marks=pytest.mark.slow)])
def test_four_clients_label_pairs_at_once(served, count):
    url, db_path, _ = served
    captions = [f"v{i:03d}-{lang}" for i in range(30) for lang in ("mr", "hi", "ta", "te", "en")]
    pairs = [
        (f"v{q:03d}-mr", c) for q in range(10) for c in captions if not c.startswith(f"v{q:03d}")
    ][:count]
    assert len(pairs) == count
    clients = [Client(url, verbose=False, analytics_enabled=False) for _ in range(4)]
    errors = []
    names = tuple(f"conc-{n}-{count}" for n in "abcd")
    threads = [
        threading.Thread(target=label_many, args=(c, name, pairs, errors))
        for c, name in zip(clients, names, strict=True)
    ]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors[:1]
    with sqlite3.connect(db_path) as db:
        for name in names:
            rows = db.execute(
                "SELECT caption_id_a, caption_id_b, label FROM labels "
                "WHERE annotator=? ORDER BY id",
                (name,),
            ).fetchall()
            assert [(a, b) for a, b, _ in rows] == pairs
            assert [label for *_, label in rows] == [(2, 1, 3, 0)[i % 4] for i in range(count)]
    print(f"{4 * count} labels through four clients in {time.perf_counter() - start:.1f} s")


def test_login_is_required_with_auth(app_dataset, model_and_vocab, tmp_path, translator, port):
    model, vocab = model_and_vocab
    demo = build_app(
        model,
        vocab,
        app_dataset,
        db_path=tmp_path / "l.sqlite",
        runs_dir=tmp_path / "runs",
        cache_dir=tmp_path / "index",
        translator=translator,
    )
    auth_file = tmp_path / "users.txt"
    auth_file.write_text(f"bala:{hash_password('b-secret', n=16, r=1, p=1)}\n", encoding="utf-8")
    logins = parse_auth(["asha:secret"], [auth_file])
    launch_app(demo, port=port(), auth=logins, prevent_thread_lock=True, quiet=True)
    try:
        assert httpx.get(demo.local_url + "config").status_code == 401
        with pytest.raises((AuthenticationError, ValueError), match="Could not login"):
            Client(demo.local_url, verbose=False, analytics_enabled=False, auth=("asha", "wrong"))
        client = Client(
            demo.local_url, verbose=False, analytics_enabled=False, auth=("asha", "secret")
        )
        whoami = client.predict("eve", api_name="/whoami")  # the user, read-only
        assert whoami["value"] == "asha" and whoami["interactive"] is False
        assert len(search(client, "कागद दुमडा", k=3)[1]["data"]) == 3
        # The annotator is the logged-in user, whatever the Annotator field says.
        shown = view(client.predict("mallory", "app-test", *QUERY, api_name="/next_unlabelled"))
        assert "asha has labelled 0 pairs" in shown["progress"]
        pair = [shown["query"], shown["candidate"], "same", "query"]
        client.predict("mallory", "app-test", *pair, api_name="/label_positive")
        client.predict("", "app-test", *pair, api_name="/label_negative")  # no name needed
        with sqlite3.connect(tmp_path / "l.sqlite") as db:
            rows = db.execute("SELECT annotator, label FROM labels ORDER BY id").fetchall()
        assert rows == [("asha", 2), ("asha", 0)]
        # A second login is a second annotator; undo in its session leaves asha's labels.
        bala = Client(
            demo.local_url, verbose=False, analytics_enabled=False, auth=("bala", "b-secret")
        )
        assert bala.predict("", api_name="/whoami")["value"] == "bala"
        bala.predict("asha", "app-test", *pair, api_name="/label_partial")
        assert "Nothing to undo" not in view(
            bala.predict("", "app-test", *QUERY, api_name="/undo")
        )["progress"]
        assert "Nothing to undo in this tab" in view(
            bala.predict("", "app-test", *QUERY, api_name="/undo")
        )["progress"]
        with sqlite3.connect(tmp_path / "l.sqlite") as db:
            rows = db.execute("SELECT annotator, label, undone FROM labels ORDER BY id").fetchall()
        assert rows == [("asha", 2, 0), ("asha", 0, 0), ("bala", 1, 1)]
    finally:
        demo.close()


def test_logins_are_throttled_per_address_and_hashed_off_the_event_loop(
        app_dataset, model_and_vocab, tmp_path, translator, port, monkeypatch):
    """Through Gradio's /login: four clients flooding it with guesses whose scrypt takes
    1 s do not hold up another request (half of them answered within 0.5 s), and after five
    failures from this address the right password is refused until the delay has passed
    (a fake clock)."""
    from app import auth

    model, vocab = model_and_vocab
    demo = build_app(model, vocab, app_dataset, db_path=tmp_path / "t.sqlite",
                     runs_dir=tmp_path / "runs", cache_dir=tmp_path / "index",
                     translator=translator)
    logins = parse_auth(["asha:secret"])
    now = [1000.0]
    logins.throttle.clock = lambda: now[0]
    real = auth._scrypt

    def slow(password, salt, n, r, p):
        time.sleep(1.0)
        return real(password, salt, 16, 1, 1)

    monkeypatch.setattr(auth, "_scrypt", slow)
    launch_app(demo, port=port(), auth=logins, prevent_thread_lock=True, quiet=True)
    url = demo.local_url

    def post(user, password):
        return httpx.post(url + "login", data={"username": user, "password": password},
                          timeout=30).status_code

    try:
        flood = [threading.Thread(target=post, args=(f"mallory{i}", "guess")) for i in range(4)]
        for thread in flood:
            thread.start()
        latencies = []
        while any(thread.is_alive() for thread in flood):
            start = time.perf_counter()
            assert httpx.get(url + "config", timeout=30).status_code == 401
            latencies.append(time.perf_counter() - start)
        for thread in flood:
            thread.join()
        latencies.sort()
        assert len(latencies) >= 2 and latencies[len(latencies) // 2] < 0.5, latencies
        assert post("nobody", "guess") == 400  # the fifth failure from 127.0.0.1
        assert post("asha", "secret") == 400  # refused: the address must wait 1 s
        assert ("address", "127.0.0.1") in logins.throttle._attempts
        now[0] += 1.0
        assert post("asha", "secret") == 200
    finally:
        demo.close()


def test_error_toasts_show_user_input_as_text(client):
    """Toasts render HTML: an image or link typed by a user must come back escaped."""
    typed = "<img src=https://example.invalid/x.png><a href=https://example.invalid>x</a>"
    with pytest.raises(Exception) as raised:
        client.predict(typed, api_name="/play")
    message = str(raised.value)
    assert "unknown caption or video id" in message
    assert "&lt;img src=https://example.invalid/x.png&gt;&lt;a href=" in message
    assert "<img" not in message and "<a " not in message
    with pytest.raises(Exception) as raised:
        client.predict("asha", "app-test", typed, "same", api_name="/open_query")
    assert "&lt;img" in str(raised.value) and "<img" not in str(raised.value)


def test_a_missing_annotator_name_is_one_message(client, served):
    for api, args in (
        ("/label_positive", ("", "app-test", "v000-mr", "v015-mr", "same", "query")),
        ("/next_unlabelled", ("  ", "app-test", "same", "query")),
        ("/skip", ("", "app-test", "v000-mr", "v015-mr", "same", "query")),
        ("/undo", ("", "app-test", "same", "query")),
    ):
        progress = client.predict(*args, api_name=api)[4]  # no error raised
        assert progress == "**Enter your name in the Annotator field (top left) to label.**"
    with sqlite3.connect(served[1]) as db:
        assert db.execute("SELECT COUNT(*) FROM labels WHERE annotator = ''").fetchone()[0] == 0


def test_two_tabs_of_one_annotator_never_get_the_same_pair(served):
    """Each tab (a client session) claims the pair it shows; the other tab skips it."""
    url, db_path, _ = served
    tabs = [Client(url, verbose=False, analytics_enabled=False) for _ in range(2)]
    shown = [
        view(tab.predict("twin", "app-test", *QUERY, api_name="/next_unlabelled")) for tab in tabs
    ]
    assert shown[0]["query"] == shown[1]["query"] == "v000-mr"
    assert shown[0]["candidate"] != shown[1]["candidate"]
    seen = [(v["query"], v["candidate"]) for v in shown]
    for _ in range(12):  # label in turns, each tab what it shows
        for i, tab in enumerate(tabs):
            pair = ["twin", "app-test", shown[i]["query"], shown[i]["candidate"], "same", "query"]
            shown[i] = view(tab.predict(*pair, api_name="/label_partial"))
            current = (shown[i]["query"], shown[i]["candidate"])
            other = shown[1 - i]
            assert current != (other["query"], other["candidate"])
            seen.append(current)
    with sqlite3.connect(db_path) as db:
        pairs = db.execute(
            "SELECT caption_id_a, caption_id_b FROM labels WHERE annotator = 'twin'"
        ).fetchall()
    assert len(pairs) == 24 == len(set(pairs))  # nothing labelled twice
    # A pair shown in the other tab is refused, not labelled a second time.
    other = shown[1]
    with pytest.raises(Exception, match="open in another tab"):
        tabs[0].predict(
            "twin",
            "app-test",
            other["query"],
            other["candidate"],
            "same",
            "query",
            api_name="/label_negative",
        )
