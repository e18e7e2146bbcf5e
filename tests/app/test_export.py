"""Relation export (JSONL and CSV), Cohen's kappa per annotator pair and the agreement report."""

import csv
import json

import pytest

from app.annotations_db import AnnotationStore
from app.export import COLUMNS, agreement, agreement_report, export, relation_records


def test_export_writes_current_labels_in_both_formats(tmp_path):
    store = AnnotationStore(tmp_path / "a.sqlite")
    store.add("sample", "asha", "v1-mr", "v2-mr", "partial")
    store.add("sample", "asha", "v1-mr", "v3-mr", "negative")
    store.add("sample", "asha", "v1-mr", "v2-mr", "description")  # relabel
    store.add("sample", "asha", "v1-mr", "v4-mr", "positive")
    store.undo("sample", "asha")  # drops v4
    store.add("other", "ravi", "a", "b", "positive")
    jsonl, csv_path, report = export(store, tmp_path / "out", dataset="sample")
    assert json.loads(report.read_text(encoding="utf-8"))["labels"] == 2
    lines = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    assert [list(line) for line in lines] == [list(COLUMNS)] * 2
    assert [(r["caption_id_b"], r["label"], r["dataset"], r["annotator"]) for r in lines] == [
        ("v3-mr", "negative", "sample", "asha"),
        ("v2-mr", "description", "sample", "asha"),
    ]
    assert lines[0]["time"].endswith("+00:00")
    with open(csv_path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == list(COLUMNS) and rows == [
        {k: str(v) for k, v in r.items()} for r in lines
    ]
    assert len(relation_records(store)) == 3  # all datasets


def test_kappa_hand_worked():
    # A: pos pos neg neg partial; B: pos neg neg neg partial. p_o = 4/5;
    # p_e = (2*1 + 2*3 + 1*1) / 25 = 9/25; kappa = (0.8 - 0.36) / 0.64 = 0.6875.
    a = ["positive", "positive", "negative", "negative", "partial"]
    b = ["positive", "negative", "negative", "negative", "partial"]
    records = [
        {
            "dataset": "d",
            "caption_id_a": "q",
            "caption_id_b": f"c{i}",
            "label": label,
            "annotator": who,
        }
        for who, labels in (("a", a), ("b", b))
        for i, label in enumerate(labels)
    ]
    records.append(
        {
            "dataset": "d",
            "caption_id_a": "q",
            "caption_id_b": "only-a",
            "label": "positive",
            "annotator": "a",
        }
    )
    records += [
        {
            "dataset": "d",
            "caption_id_a": "q",
            "caption_id_b": "c0",
            "label": "positive",
            "annotator": "c",
        }
    ]
    rows = {(r["annotator_a"], r["annotator_b"]): r for r in agreement(records)}
    assert rows[("a", "b")]["shared_pairs"] == 5
    assert rows[("a", "b")]["kappa"] == pytest.approx(0.6875)
    assert rows[("a", "c")] == {
        "annotator_a": "a",
        "annotator_b": "c",
        "shared_pairs": 1,
        "kappa": None,
    }


def test_kappa_undefined_when_both_use_one_label():
    records = [
        {
            "dataset": "d",
            "caption_id_a": "q",
            "caption_id_b": f"c{i}",
            "label": "negative",
            "annotator": who,
        }
        for who in ("a", "b")
        for i in range(4)
    ]
    assert agreement(records)[0]["kappa"] is None


def test_csv_cells_that_spreadsheets_would_run_are_quoted(tmp_path):
    """Annotator names or ids starting with = + - @ reach a spreadsheet as text,
    and import-relations reads the export back as it was stored."""
    from heuristics.relations import read_manual

    store = AnnotationStore(tmp_path / "a.sqlite")
    store.add("sample", "=HYPERLINK(\"http://x\")", "v1-mr", "v2-mr", "partial")
    store.add("sample", "+1", "v1-mr", "-v3", "negative")
    store.add("sample", "@me", "v1-mr", "v2-mr", "positive")
    jsonl, csv_path, _ = export(store, tmp_path / "out")
    with open(csv_path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["annotator"] for r in rows] == ["'=HYPERLINK(\"http://x\")", "'+1", "'@me"]
    assert rows[1]["caption_id_b"] == "'-v3" and rows[0]["caption_id_a"] == "v1-mr"
    assert json.loads(jsonl.read_text(encoding="utf-8").splitlines()[1])["annotator"] == "+1"
    table, _ = read_manual([csv_path], {"v1-mr", "v2-mr", "-v3"})
    assert sorted(table.column("annotator").to_pylist()) == sorted(
        ["=HYPERLINK(\"http://x\")", "+1", "@me"])
    assert "-v3" in table.column("caption_id_b").to_pylist()


def test_nul_bytes_in_names_are_refused_before_writing(tmp_path):
    from app.export import ExportError

    store = AnnotationStore(tmp_path / "a.sqlite")
    store.add("sample", "as\0ha", "v1-mr", "v2-mr", "partial")
    with pytest.raises(ExportError, match=r"record 1 .*annotator 'as\\x00ha' holds a NUL byte"):
        export(store, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_export_into_a_file_is_one_error_line(tmp_path, capsys):
    import app.__main__ as app_cli

    store = AnnotationStore(tmp_path / "a.sqlite")
    store.add("sample", "asha", "v1-mr", "v2-mr", "partial")
    target = tmp_path / "taken.csv"
    target.write_text("keep me", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        app_cli.main(["--db", str(tmp_path / "a.sqlite"), "--export", str(target)])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1
    assert f"--export: {target} is a file" in err[0] and target.read_text() == "keep me"


def records_of(labels: dict[str, list[str]]) -> list[dict]:
    """Export records: annotator -> one label per pair c0, c1, ... ('' for none)."""
    return [{"dataset": "d", "caption_id_a": "q", "caption_id_b": f"c{i}", "label": label,
             "annotator": who, "time": "2026-01-01T00:00:00+00:00"}
            for who, given in labels.items() for i, label in enumerate(given) if label]


def test_the_agreement_report_by_hand():
    # c0: all agree; c1: asha says partial, the others negative; c2: one label only;
    # c3: positive vs description (on no ordinal scale: only the nominal alpha sees it)
    records = records_of({
        "asha": ["positive", "partial", "negative", "positive"],
        "ravi": ["positive", "negative", "", "description"],
        "mina": ["positive", "negative", "", ""],
    })
    report = agreement_report(records)
    assert (report["annotators"], report["labels"], report["pairs"], report["shared_pairs"]) == (
        3, 9, 4, 3)
    asha, mina, ravi = report["per_annotator"]
    assert asha == {"annotator": "asha", "labels": 4, "shared_pairs": 3,
                    "agreement": round(2 / 5, 3), "alpha_without": 1.0}
    assert mina["agreement"] == 0.75 and ravi["agreement"] == 0.6  # 3 of 4, 3 of 5
    assert [(d["caption_id_b"], d["labels"]) for d in report["disagreements"]] == [
        ("c1", {"asha": "partial", "mina": "negative", "ravi": "negative"}),
        ("c3", {"asha": "positive", "ravi": "description"}),
    ]
    # ordinal: units c0 (2,2,2) and c1 (1,0,0); c3 has one value on the scale
    from rudder.evaluation.agreement import krippendorff_alpha

    ordinal = krippendorff_alpha([[2, 1], [2, 0], [2, 0]], "ordinal")
    assert report["alpha"]["ordinal"] == round(ordinal, 3)
    nominal = krippendorff_alpha([[2, 1, 0, 2], [2, 0, float("nan"), 3],
                                  [2, 0, float("nan"), float("nan")]], "nominal")
    assert report["alpha"]["nominal"] == round(nominal, 3)
    assert agreement_report([]) == {"annotators": 0, "labels": 0, "pairs": 0,
                                    "shared_pairs": 0, "alpha": {"nominal": None,
                                                                 "ordinal": None},
                                    "kappa": [], "per_annotator": [], "disagreements": []}
