import json

import pytest
import yaml

from heuristics.__main__ import main
from heuristics.relations import RelationError, read_manual, read_video_sets, video_relations
from rudder.data.layout import DatasetFolder
from rudder.supervision import RelationTable

SETS = """video_id,objects,actions
v1,paper;scissors,cut
v2,paper,fold
v3,bottle,
v4,card,c092 1.0 2.0;c001 0.0 1.0
v5,card,c092 0.5 3.0
"""


def rows(table):
    data = table.to_pydict()
    return sorted(zip(data["caption_id_a"], data["caption_id_b"], data["label"], data["annotator"],
                      strict=True))


@pytest.fixture
def sets_path(tmp_path):
    path = tmp_path / "sets.csv"
    path.write_text(SETS, encoding="utf-8")
    return path


def test_read_video_sets_parses_charades_actions(sets_path):
    sets = read_video_sets(sets_path)
    assert sets["v4"] == (["card"], ["c092", "c001"])
    assert sets["v3"] == (["bottle"], [])


def test_video_heuristic_by_hand(tiny_dataset, sets_path):
    table = video_relations(tiny_dataset, read_video_sets(sets_path), alpha_o=0.5, alpha_a=0.5)
    h = "video-heuristic"
    # v1 -> v2: objects 1/2 shared -> partial; v2 -> v1: objects 1/1 but action 0/1 -> partial;
    # v4 -> v5: objects 1/1, actions 1/2 -> partial; v5 -> v4: all shared -> positive;
    # v3 shares nothing.
    assert rows(table) == sorted(
        [
            ("c1", "c3", 1, h),
            ("c2", "c3", 1, h),
            ("c3", "c1", 1, h),
            ("c3", "c2", 1, h),
            ("c5", "c6", 1, h),
            ("c6", "c5", 2, h),
        ]
    )
    # training reads each direction: c6 is partial for the query c5, c5 positive for c6
    ids = ["c1", "c3", "c5", "c6"]
    assert RelationTable(ids, table).lookup(ids).tolist() == [
        [-1, 1, -1, -1], [1, -1, -1, -1], [-1, -1, -1, 1], [-1, -1, 2, -1]]
    # stricter object threshold: v1 -> v2 (1/2) drops out, v2 -> v1 (1/1) stays partial
    strict = video_relations(tiny_dataset, read_video_sets(sets_path), alpha_o=0.75, alpha_a=0.75)
    assert ("c1", "c3", 1, h) not in rows(strict) and ("c3", "c1", 1, h) in rows(strict)


def test_read_manual_csv_and_jsonl(tmp_path):
    csv_path = tmp_path / "a.csv"
    csv_path.write_text(
        "caption_id_a,caption_id_b,label,annotator\nc1,c3,partial,ann1\nc1,c3,3,ann2\nc3,c1,negative,\n",
        encoding="utf-8",
    )
    jsonl = tmp_path / "export.jsonl"
    records = [
        {
            "caption_id_a": "c1",
            "caption_id_b": "c3",
            "label": "positive",
            "annotator": "ann1",
            "time": "2024-01-02T10:00:00",
        },
        {
            "caption_id_a": "c1",
            "caption_id_b": "c3",
            "label": 0,
            "annotator": "ann1",
            "time": "2024-01-01T10:00:00",
        },
    ]
    jsonl.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    known = {"c1", "c2", "c3"}
    assert rows(read_manual([csv_path], known)[0]) == [
        ("c1", "c3", 1, "ann1"),
        ("c1", "c3", 3, "ann2"),
        ("c3", "c1", 0, "manual"),
    ]
    # the export's later time wins over the CSV row (no time) and over the older export row
    assert rows(read_manual([csv_path, jsonl], known)[0])[0] == ("c1", "c3", 2, "ann1")


@pytest.mark.parametrize(
    "earlier, later",
    [
        (999999999, 1700000000),  # 2001 and 2023 as numbers (as strings 999... came last)
        ("999999999", "1700000000.5"),
        ("2024-01-01T10:00:00+02:00", "2024-01-01T09:30:00Z"),  # 08:00 and 09:30 UTC
        ("2024-01-01T09:00:00", "2024-01-01T09:30:00+00:00"),  # no offset: UTC
    ],
)
def test_the_latest_time_wins_as_an_instant(tmp_path, earlier, later):
    path = tmp_path / "export.jsonl"
    record = {"caption_id_a": "c1", "caption_id_b": "c3", "annotator": "a"}
    lines = [{**record, "label": 2, "time": later}, {**record, "label": 0, "time": earlier}]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    assert rows(read_manual([path], {"c1", "c3"})[0]) == [("c1", "c3", 2, "a")]


@pytest.mark.parametrize("time", ["nan", float("nan"), "inf", "sometime"])
def test_a_time_that_is_no_instant_is_an_error(tmp_path, time):
    path = tmp_path / "export.jsonl"
    record = {"caption_id_a": "c1", "caption_id_b": "c3", "annotator": "a", "label": 2}
    path.write_text(json.dumps({**record, "time": time}) + "\n", encoding="utf-8")
    with pytest.raises(RelationError, match=r"export.jsonl:1: time .* is neither ISO-8601"):
        read_manual([path], {"c1", "c3"})


@pytest.mark.parametrize(
    "name, text, message",
    [
        (
            "a.csv",
            "caption_id_a,caption_id_b,label\nc1,c9,partial\n",
            r"a.csv:2: caption_id 'c9' is not in the dataset",
        ),
        (
            "a.csv",
            "caption_id_a,caption_id_b,label\nc1,c3,maybe\n",
            r"a.csv:2: label 'maybe' is not one of negative \(0\)",
        ),
        ("a.csv", "caption_id_a,caption_id_b,label\nc1,c3,7\n", r"a.csv:2: label 7 is not one of"),
        (
            "a.csv",
            "caption_id_a,caption_id_b,label\nc1,c1,partial\n",
            r"a.csv:2: a caption cannot be related to itself",
        ),
        (
            "a.csv",
            "caption_id_a,label\nc1,partial\n",
            r"a.csv:2: missing field\(s\) \['caption_id_b'\]",
        ),
        (
            "a.jsonl",
            '{"caption_id_a": "c1", "caption_id_b": "c3", "label": 1}\n{oops\n',
            r"a.jsonl:2: not a JSON object",
        ),
        ("a.txt", "x", r"a.txt: use a .jsonl"),
        (
            "a.csv",
            "caption_id_a,caption_id_b,label,time\nc1,c3,1,yesterday\n",
            r"a.csv:2: time 'yesterday' is neither ISO-8601 .* nor seconds since 1970",
        ),
    ],
)
def test_manual_errors_name_file_and_line(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RelationError, match=message):
        read_manual([path], {"c1", "c2", "c3"})


def test_cli_merges_and_updates_the_card(tiny_dataset, sets_path, tmp_path, capsys):
    assert DatasetFolder(tiny_dataset).relations() is None
    assert main(["video-relations", "--dataset", str(tiny_dataset), "--sets", str(sets_path)]) == 0
    assert DatasetFolder(tiny_dataset).relations().num_rows == 6
    front = (tiny_dataset / "README.md").read_text(encoding="utf-8").split("---\n")[1]
    configs = {c["config_name"]: c for c in yaml.safe_load(front)["configs"]}
    assert configs["relations"]["data_files"] == [
        {"split": "train", "path": "relations/all.parquet"}
    ]
    assert configs["relations"]["description"].startswith("data sha256 ")
    manual = tmp_path / "m.csv"
    manual.write_text(
        "caption_id_a,caption_id_b,label,annotator\nc1,c5,description,ann\n", encoding="utf-8"
    )
    assert main(["import-relations", "--dataset", str(tiny_dataset), str(manual)]) == 0
    assert "now has 7 relations" in capsys.readouterr().out
    # re-running the heuristic with other thresholds replaces only its own rows
    assert (
        main(
            [
                "video-relations",
                "--dataset",
                str(tiny_dataset),
                "--sets",
                str(sets_path),
                "--alpha-o",
                "0.75",
                "--alpha-a",
                "0.75",
            ]
        )
        == 0
    )
    table = rows(DatasetFolder(tiny_dataset).relations())
    assert ("c1", "c5", 3, "ann") in table and ("c1", "c3", 1, "video-heuristic") not in table
    # a bad file changes nothing
    before = DatasetFolder(tiny_dataset).relations()
    manual.write_text("caption_id_a,caption_id_b,label\nc1,nope,1\n", encoding="utf-8")
    assert main(["import-relations", "--dataset", str(tiny_dataset), str(manual)]) == 2
    assert "m.csv:2: caption_id 'nope' is not in the dataset" in capsys.readouterr().err
    assert DatasetFolder(tiny_dataset).relations().equals(before)


def test_video_sets_errors(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("video_id,objects\nv1,paper\n", encoding="utf-8")
    with pytest.raises(RelationError, match=r"s.csv:1: missing column\(s\) \['actions'\]"):
        read_video_sets(path)
    path.write_text("video_id,objects,actions\nv1,paper,cut\nv1,card,fold\n", encoding="utf-8")
    with pytest.raises(RelationError, match=r"s.csv:3: video 'v1' listed twice"):
        read_video_sets(path)


def test_disagreeing_annotators_are_resolved_on_import(tiny_dataset, sets_path, tmp_path, capsys):
    """App export -> import-relations -> the RelationTable training loads, with annotators
    who disagree on a directed pair that the video heuristic also labels (c1 -> c3 partial)."""
    from app.annotations_db import AnnotationStore
    from app.export import export

    assert main(["video-relations", "--dataset", str(tiny_dataset), "--sets", str(sets_path)]) == 0
    store = AnnotationStore(tmp_path / "labels.sqlite")
    for annotator, label in (("asha", "positive"), ("ravi", "negative"), ("mina", "positive")):
        store.add("tiny", annotator, "c1", "c3", label)
    store.add("tiny", "asha", "c2", "c4", "partial")
    jsonl, *_ = export(store, tmp_path / "out")
    before = DatasetFolder(tiny_dataset).relations()
    assert main(["import-relations", "--dataset", str(tiny_dataset), str(jsonl)]) == 2
    error = capsys.readouterr().err
    assert "pair (query c1, candidate c3): asha positive, mina positive, ravi negative" in error
    assert "--resolve majority or --resolve annotator:NAME" in error
    assert DatasetFolder(tiny_dataset).relations().equals(before)

    def imported(*flags):
        assert main(["import-relations", "--dataset", str(tiny_dataset), str(jsonl), *flags]) == 0
        table = DatasetFolder(tiny_dataset).relations()
        ids = ["c1", "c2", "c3", "c4"]
        return RelationTable(ids, table).lookup_positions([0, 1], [2, 3]).tolist()

    assert imported("--resolve", "majority") == [[2, -1], [1, 1]]
    assert imported("--resolve", "annotator:ravi") == [[0, -1], [1, 1]]
    store.add("tiny", "ravi", "c2", "c4", "negative")
    jsonl, *_ = export(store, tmp_path / "out")
    assert imported("--resolve", "annotator:ravi") == [[0, -1], [1, 0]]
    assert main(["import-relations", "--dataset", str(tiny_dataset), str(jsonl),
                 "--resolve", "majority"]) == 2
    error = capsys.readouterr().err
    assert "(query c2, candidate c4): asha partial, ravi negative" in error
    assert "their votes tie; rerun with --resolve annotator:NAME" in error
    assert main(["import-relations", "--dataset", str(tiny_dataset), str(jsonl),
                 "--resolve", "annotator:mina"]) == 2  # mina labelled c1 -> c3 only
    assert "mina did not label it; rerun with --resolve majority" in capsys.readouterr().err
    assert main(["import-relations", "--dataset", str(tiny_dataset), str(jsonl),
                 "--resolve", "annotator:video-heuristic"]) == 2  # it dropped every label
    assert "manual labels always override" in capsys.readouterr().err


def test_an_export_of_several_datasets_imports_the_targets_records(tiny_dataset, tmp_path, capsys):
    from app.annotations_db import AnnotationStore
    from app.export import export

    store = AnnotationStore(tmp_path / "labels.sqlite")
    store.add("tiny", "asha", "c1", "c3", "partial")
    store.add("other", "asha", "v000-mr", "v001-mr", "positive")  # ids tiny does not have
    store.add("other", "asha", "c1", "c3", "negative")  # same ids, another dataset
    jsonl, csv_path, _ = export(store, tmp_path / "out")
    for path in (jsonl, csv_path):
        assert main(["import-relations", "--dataset", str(tiny_dataset), str(path)]) == 0
        out = capsys.readouterr().out
        assert "1 manual relations read" in out
        assert "2 record(s) of datasets other than 'tiny' skipped" in out
        assert rows(DatasetFolder(tiny_dataset).relations()) == [("c1", "c3", 1, "asha")]


def test_concurrent_imports_keep_both_writers_rows(tiny_dataset, tmp_path, capsys):
    """Process A is slowed between reading and writing the relations; B imports meanwhile:
    B waits for A's lock, so both rows survive (B's were lost without the lock)."""
    from .conftest import start_slowed

    alice, bob = tmp_path / "alice.csv", tmp_path / "bob.csv"
    alice.write_text("caption_id_a,caption_id_b,label,annotator\nc1,c3,partial,alice\n")
    bob.write_text("caption_id_a,caption_id_b,label,annotator\nc4,c1,negative,bob\n")
    writer = start_slowed(
        "heuristics.relations",
        "merge",
        tmp_path / "inside",
        ["import-relations", "--dataset", tiny_dataset, alice],
    )
    assert main(["import-relations", "--dataset", str(tiny_dataset), str(bob)]) == 0
    assert writer.wait(timeout=60) == 0, writer.communicate()
    assert rows(DatasetFolder(tiny_dataset).relations()) == [
        ("c1", "c3", 1, "alice"),
        ("c4", "c1", 0, "bob"),
    ]


def test_sets_matching_no_video_are_refused_and_keep_earlier_rows(
    tiny_dataset, sets_path, tmp_path, capsys
):
    """Ids of another dataset or spelling gave 0 relations, exit 0, and deleted every
    earlier video-heuristic row."""
    argv = ["video-relations", "--dataset", str(tiny_dataset), "--sets"]
    assert main([*argv, str(sets_path)]) == 0
    assert "5 of the dataset's 5 captioned videos are in" in capsys.readouterr().out
    before = DatasetFolder(tiny_dataset).relations()
    other = tmp_path / "other.csv"
    other.write_text(SETS.replace("\nv", "\nV"), encoding="utf-8")
    assert main([*argv, str(other)]) == 2
    err = capsys.readouterr().err
    assert f"error: {other}: none of its 5 video ids is a captioned video of" in err
    assert "(the file has e.g. 'V1', the dataset 'v1')" in err
    assert DatasetFolder(tiny_dataset).relations().equals(before)
