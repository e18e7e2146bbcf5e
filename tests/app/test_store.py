"""The SQLite annotation store: labels, relabels, undo, concurrent writers, a killed writer."""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from app.annotations_db import AnnotationError, AnnotationStore, label_code

ROOT = Path(__file__).resolve().parents[2]


def test_labels_relabels_and_undo(tmp_path):
    store = AnnotationStore(tmp_path / "a.sqlite")
    store.add("ds", "asha", "q1", "c1", "partial")
    store.add("ds", "asha", "q1", "c2", "negative")
    store.add("ds", "asha", "q1", "c1", "positive")  # relabel: the newest counts
    store.add("ds", "ravi", "q1", "c1", 3)
    current = {(r["annotator"], r["caption_id_b"]): r["label"] for r in store.current("ds")}
    assert current == {("asha", "c1"): 2, ("asha", "c2"): 0, ("ravi", "c1"): 3}
    assert store.labelled_candidates("ds", "asha", "q1") == {"c1", "c2"}
    assert store.counts_by_query("ds", "asha") == {"q1": 2}

    undone = store.undo("ds", "asha")  # undoes the relabel: c1 is partial again
    assert (undone["caption_id_b"], undone["label"]) == ("c1", 2)
    assert {r["caption_id_b"]: r["label"] for r in store.current("ds", "asha")} == {
        "c1": 1,
        "c2": 0,
    }
    store.undo("ds", "asha")
    store.undo("ds", "asha")
    assert store.current("ds", "asha") == [] and store.undo("ds", "asha") is None
    assert store.annotators("ds") == ["ravi"]
    with sqlite3.connect(tmp_path / "a.sqlite") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT COUNT(*) FROM labels").fetchone()[0] == 4  # nothing deleted


def test_bad_input_is_refused(tmp_path):
    store = AnnotationStore(tmp_path / "a.sqlite")
    with pytest.raises(AnnotationError, match="annotator name"):
        store.add("ds", "  ", "q", "c", "positive")
    with pytest.raises(AnnotationError, match="unknown label 'great'"):
        store.add("ds", "a", "q", "c", "great")
    with pytest.raises(AnnotationError, match="against itself"):
        store.add("ds", "a", "q", "q", "positive")
    with pytest.raises(AnnotationError, match="both caption ids"):
        store.add("ds", "a", "", "c", "positive")
    assert label_code("description") == 3 and label_code(0) == 0


def test_a_new_file_being_set_up_elsewhere_is_waited_for(tmp_path):
    # another process creating the file holds a write lock; switching to WAL then fails at
    # once ("database is locked") instead of waiting, unless the store retries
    path = tmp_path / "a.sqlite"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE setup (x)")
    other.execute("BEGIN IMMEDIATE")
    timer = threading.Timer(0.3, other.execute, ["COMMIT"])
    timer.start()
    try:
        store = AnnotationStore(path, busy_timeout=10)
    finally:
        timer.join()
        other.close()
    store.add("ds", "asha", "q", "c", "partial")
    assert len(store.current("ds")) == 1


def test_a_file_that_is_not_an_annotation_database_is_named(tmp_path):
    (tmp_path / "text.sqlite").write_text("not sqlite", encoding="utf-8")
    with sqlite3.connect(tmp_path / "other.sqlite") as db:
        db.execute("CREATE TABLE labels (name TEXT)")
    for path, reason in (
        (tmp_path, "unable to open"),
        (tmp_path / "text.sqlite", "file is not a database"),
        (tmp_path / "other.sqlite", "no such column"),
    ):
        with pytest.raises(AnnotationError, match=f"{path}: not an annotation database .*{reason}"):
            AnnotationStore(path)


WRITER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from app.annotations_db import AnnotationStore
    store = AnnotationStore(sys.argv[1])
    name, count = sys.argv[2], int(sys.argv[3])
    labels = ("negative", "partial", "positive", "description")
    for i in range(count):
        print(store.add("ds", name, f"q{{i // 20}}", f"c{{i}}", labels[i % 4]), flush=True)
""")


def writer(tmp_path, name, count):
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(root=str(ROOT)))
    return subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "a.sqlite"), name, str(count)],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    AnnotationStore(tmp_path / "a.sqlite")
    procs = [writer(tmp_path, name, 200) for name in ("asha", "ravi")]
    outputs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    store = AnnotationStore(tmp_path / "a.sqlite")
    for name, ids in zip(("asha", "ravi"), outputs, strict=True):
        rows = store.current("ds", name)
        assert len(ids) == 200 and len(rows) == 200
        assert sorted(r["id"] for r in rows) == sorted(map(int, ids))
        assert {r["caption_id_b"] for r in rows} == {f"c{i}" for i in range(200)}


def test_a_killed_writer_keeps_every_acknowledged_label(tmp_path):
    AnnotationStore(tmp_path / "a.sqlite")
    proc = writer(tmp_path, "asha", 100_000)
    acknowledged = [int(proc.stdout.readline()) for _ in range(60)]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    with sqlite3.connect(tmp_path / "a.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    ids = {r["id"] for r in AnnotationStore(tmp_path / "a.sqlite").current("ds", "asha")}
    assert set(acknowledged) <= ids


def test_claims_keep_two_tabs_of_one_annotator_apart(tmp_path):
    store = AnnotationStore(tmp_path / "a.sqlite")
    order = ["c1", "c2", "c3", "c4"]
    assert store.claim("tab-a", "ds", "asha", "q1", order) == "c1"
    assert store.claim("tab-b", "ds", "asha", "q1", order) == "c2"  # c1 is tab a's
    assert store.claim("tab-c", "ds", "ravi", "q1", order) == "c1"  # another annotator
    with pytest.raises(AnnotationError, match="open in another tab of asha"):
        store.add("ds", "asha", "q1", "c1", "positive", session="tab-b")
    store.add("ds", "asha", "q1", "c1", "positive", session="tab-a")
    assert store.claim("tab-a", "ds", "asha", "q1", order) == "c3"  # c1 labelled, c2 taken
    assert store.claim("tab-a", "ds", "asha", "q1", order) == "c3"  # its own claim is no bar
    assert store.claim("tab-b", "ds", "asha", "q1", ["c1", "c3"]) is None
    assert store.claim("tab-b", "ds", "asha", "q1", ["c3"], force=True) == "c3"  # undo's pair
    assert store.claim("tab-a", "ds", "asha", "q1", order) == "c2"  # tab b let c2 go
    store.clock = lambda: 1e12  # much later: every claim has expired
    assert store.claim("tab-d", "ds", "asha", "q1", order) == "c2"


CLAIMER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from app.annotations_db import AnnotationStore
    store = AnnotationStore(sys.argv[1])
    process = sys.argv[2]
    candidates = [f"c{{i}}" for i in range(60)]
    while True:  # two tabs per process, taking turns, all as one annotator
        claimed = [store.claim(f"{{process}}-{{t}}", "ds", "asha", "q", candidates) for t in "xy"]
        if claimed == [None, None]:
            break
        for tab, pair in zip("xy", claimed):
            if pair is not None:
                store.add("ds", "asha", "q", pair, "partial", session=f"{{process}}-{{tab}}")
                print(pair, flush=True)
""")


def test_claims_are_atomic_across_processes(tmp_path):
    """Four processes, eight tabs of one annotator: every pair is labelled exactly once."""
    AnnotationStore(tmp_path / "a.sqlite")
    script = tmp_path / "claimer.py"
    script.write_text(CLAIMER.format(root=str(ROOT)))
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / "a.sqlite"), f"p{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in outputs][:1]
    labelled = [pair for out, _ in outputs for pair in out.split()]
    assert sorted(labelled) == sorted(f"c{i}" for i in range(60))
    rows = AnnotationStore(tmp_path / "a.sqlite").current("ds", "asha")
    assert len(rows) == 60 == len({r["caption_id_b"] for r in rows})


def test_undo_with_a_session_undoes_only_that_tabs_labels(tmp_path):
    store = AnnotationStore(tmp_path / "l.sqlite")
    store.add("ds", "asha", "q1", "c1", "positive", session="tab-a")
    store.add("ds", "asha", "q1", "c2", "partial", session="tab-b")  # newer, other tab
    undone = store.undo("ds", "asha", session="tab-a")
    assert undone["caption_id_b"] == "c1"
    assert [r["caption_id_b"] for r in store.current("ds", "asha")] == ["c2"]
    assert store.undo("ds", "asha", session="tab-a") is None  # nothing left in tab a
    assert store.undo("ds", "asha", session="tab-b")["caption_id_b"] == "c2"


def test_a_database_from_before_per_tab_undo_gets_its_session_column(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE labels (id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL,"
            " annotator TEXT NOT NULL, caption_id_a TEXT NOT NULL, caption_id_b TEXT NOT NULL,"
            " label INTEGER NOT NULL, time TEXT NOT NULL, undone INTEGER NOT NULL DEFAULT 0)"
        )
        db.execute("INSERT INTO labels VALUES (1, 'ds', 'asha', 'q', 'c', 2, 't', 0)")
    store = AnnotationStore(path)
    store.add("ds", "asha", "q", "d", "negative", session="tab")
    assert store.undo("ds", "asha", session="tab")["caption_id_b"] == "d"
    assert store.undo("ds", "asha", session="tab") is None  # the old row has no session
    assert [r["caption_id_b"] for r in store.current("ds", "asha")] == ["c"]


def queue_rows(pairs, lang_b="mr"):
    return [(a, b, "mr", lang_b, 0.5, 0, 1) for a, b in pairs]


def test_a_queue_serves_its_pairs_in_order_to_each_annotator(tmp_path):
    store = AnnotationStore(tmp_path / "a.sqlite")
    store.add("ds", "asha", "q1", "c2", "partial")  # before the queue exists
    store.replace_queue("ds", "heuristic", queue_rows([("q1", "c1"), ("q1", "c2"), ("q2", "c1")]),
                        key="k", share=0.0)
    assert store.queue_info("ds", "heuristic")["size"] == 3
    first = store.claim_from_queue("tab-a", "ds", "ravi", "heuristic")
    assert (first["position"], first["caption_id_b"]) == (0, "c1")
    # another annotator never gets a pair someone else holds or labelled (one copy each)
    second = store.claim_from_queue("tab-b", "ds", "mina", "heuristic")
    assert second["position"] == 2
    assert store.claim_from_queue("tab-c", "ds", "lena", "heuristic") is None
    store.add("ds", "ravi", "q1", "c1", "negative", session="tab-a")
    store.add("ds", "ravi", "q1", "c1", "positive", session="tab-a")  # a relabel counts once
    assert store.queue_progress("ds", "heuristic") == {"labelled": 2, "doubled": 0,
                                                       "double_done": 0}
    assert store.claim_from_queue("tab-a", "ds", "ravi", "heuristic") is None  # all done/held
    store.undo("ds", "ravi", session="tab-a")
    assert store.queue_progress("ds", "heuristic")["labelled"] == 2  # the first label remains
    store.undo("ds", "ravi", session="tab-a")
    assert store.queue_progress("ds", "heuristic")["labelled"] == 1
    assert store.claim_from_queue("tab-c", "ds", "lena", "heuristic")["position"] == 0


def test_skipping_moves_on_and_wraps_around(tmp_path):
    store = AnnotationStore(tmp_path / "a.sqlite")
    store.replace_queue("ds", "random", queue_rows([("q1", "c1"), ("q1", "c2"), ("q2", "c3")]),
                        key="k", share=0.0)
    assert store.claim_from_queue("tab", "ds", "asha", "random", after=0)["position"] == 1
    assert store.claim_from_queue("tab", "ds", "asha", "random", after=2)["position"] == 0


def test_double_pairs_go_to_two_different_annotators(tmp_path):
    store = AnnotationStore(tmp_path / "a.sqlite")
    store.replace_queue("ds", "heuristic", queue_rows([("q1", "c1"), ("q1", "c2")]), key="k",
                        share=1.0)
    first = store.claim_from_queue("asha-1", "ds", "asha", "heuristic")
    assert first["copies"] == 2 and first["position"] == 0
    # asha's second tab gets the next pair; ravi gets the first one too
    assert store.claim_from_queue("asha-2", "ds", "asha", "heuristic")["position"] == 1
    assert store.claim_from_queue("ravi-1", "ds", "ravi", "heuristic")["position"] == 0
    store.add("ds", "asha", "q1", "c1", "partial", session="asha-1")
    store.add("ds", "ravi", "q1", "c1", "positive", session="ravi-1")
    assert store.queue_progress("ds", "heuristic") == {"labelled": 1, "doubled": 2,
                                                       "double_done": 1}
    assert store.claim_from_queue("ravi-1", "ds", "ravi", "heuristic")["position"] == 1
    assert store.claim_from_queue("mina", "ds", "mina", "heuristic") is None  # all held


def test_queue_languages_and_the_rows_of_pairs(tmp_path):
    store = AnnotationStore(tmp_path / "a.sqlite")
    store.replace_queue("ds", "heuristic",
                        queue_rows([("q1", "c1")], "hi") + queue_rows([("q1", "c2")], "mr"),
                        key="k", share=0.0)
    assert store.claim_from_queue("t", "ds", "asha", "heuristic", lang_mode=("same", None))[
        "caption_id_b"] == "c2"
    assert store.claim_from_queue("t", "ds", "asha", "heuristic", lang_mode=("lang", "hi"))[
        "caption_id_b"] == "c1"
    assert store.queue_row("ds", "heuristic", "q1", "c2")["position"] == 1
    assert store.queue_row("ds", "heuristic", "q1", "c9") is None


def test_the_next_pair_is_an_index_seek(tmp_path):
    store = AnnotationStore(tmp_path / "a.sqlite")
    store.replace_queue("ds", "heuristic", queue_rows([(f"q{i}", "c") for i in range(50)]),
                        key="k", share=0.1)
    with sqlite3.connect(store.path) as db:
        plan = " ".join(str(row) for row in db.execute(
            "EXPLAIN QUERY PLAN SELECT position FROM queue INDEXED BY queue_open"
            " WHERE dataset = 'ds' AND strategy = 'heuristic' AND labels < copies"
            " AND position > -1 ORDER BY position LIMIT 1"))
    assert "queue_open" in plan and "SCAN queue " not in plan and "TEMP B-TREE" not in plan


def test_which_pairs_are_doubled_is_fixed_by_the_pair():
    from app.annotations_db import doubled

    pairs = [(f"v{i}-mr-0", f"v{i + 1}-hi-2") for i in range(4000)]
    share = sum(doubled(a, b, 0.1) for a, b in pairs) / len(pairs)
    assert 0.08 < share < 0.12
    assert all(doubled(a, b, 1.0) for a, b in pairs[:10])
    assert not any(doubled(a, b, 0.0) for a, b in pairs[:10])
