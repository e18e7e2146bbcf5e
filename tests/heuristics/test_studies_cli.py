"""The study commands of heuristics/studies/: a bad language or an unreadable file
is one ``error:`` line naming it, exit code 2; good input gives the study's numbers."""

from __future__ import annotations

import importlib

import pytest

JUNK = bytes(range(256))
SENTENCE = (
    "# sent_id = 1\n"
    "# text = उसने कमरा साफ किया\n"
    "1\tउसने\tवह\tPRON\t_\t_\t4\tnsubj\t_\t_\n"
    "2\tकमरा\tकमरा\tNOUN\t_\t_\t4\tobj\t_\t_\n"
    "3\tसाफ\tसाफ\tADJ\t_\t_\t4\tcompound:lvc\t_\t_\n"
    "4\tकिया\tकर\tVERB\t_\t_\t0\troot\t_\t_\n\n"
)


def run(name: str, argv: list[str], capsys) -> tuple[int, str, str]:
    main = importlib.import_module(f"heuristics.studies.{name}").main
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def one_error(code, err) -> str:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("name, argv", [
    ("lemma_eval", ["--model-dir", "M", "--conllu", "C", "--lang", "xx"]),
    ("light_verbs_ud", ["--lang", "xx", "--train", "T", "--test", "T"]),
    ("indic_sample", ["--model-dir", "M", "--lang", "mr", "xx"]),
    ("ud_eval", ["--lang", "xx"]),
])
def test_an_unsupported_language_is_refused_before_any_work(name, argv, capsys, tmp_path):
    argv = [str(tmp_path / a) if a in ("M", "C", "T") else a for a in argv]
    line = one_error(*run(name, argv, capsys)[::2])
    assert "'xx'" in line


@pytest.mark.parametrize("name, flag, argv", [
    ("lemma_eval", "--conllu", ["--model-dir", "M", "--lang", "mr"]),
    ("light_verbs_ud", "--train", ["--lang", "hi", "--test", "M"]),
    ("charades_stats", "--file", ["--model-dir", "M"]),
    ("indic_sample", "--lexicon", ["--model-dir", "M"]),
])
def test_a_binary_file_is_one_error_line_naming_it(name, flag, argv, capsys, tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(JUNK)
    argv = [str(tmp_path / "absent") if a == "M" else a for a in argv] + [flag, str(junk)]
    line = one_error(*run(name, argv, capsys)[::2])
    assert str(junk) in line and "not UTF-8" in line


def test_charades_stats_refuses_a_file_without_captions(capsys, tmp_path):
    empty = tmp_path / "captions.txt"
    empty.write_text("no caption here\n", encoding="utf-8")
    argv = ["--model-dir", str(tmp_path / "absent"), "--file", str(empty)]
    line = one_error(*run("charades_stats", argv, capsys)[::2])
    assert str(empty) in line and "##" in line


def test_epic_eval_names_the_missing_csv_of_its_folder(capsys, tmp_path):
    argv = ["--model-dir", str(tmp_path / "absent"), "--epic", str(tmp_path)]
    line = one_error(*run("epic_eval", argv, capsys)[::2])
    assert str(tmp_path / "EPIC_100_retrieval_train_sentence.csv") in line


def test_light_verbs_ud_counts_a_hand_made_construction(capsys, tmp_path):
    """साफ (compound:lvc) + किया (lemma कर): one gold join, and the extraction joins it."""
    path = tmp_path / "hi.conllu"
    path.write_text(SENTENCE, encoding="utf-8")
    code, out, err = run("light_verbs_ud", ["--lang", "hi", "--train", str(path),
                                            "--test", str(path)], capsys)
    assert code == 0, err
    assert out.splitlines() == [
        "hi hi.conllu, no class map (1 listed): gold 1, joined 1, right 1, P 100.0, R 100.0",
        ("hi hi.conllu, class map of train (1 listed): gold 1, joined 1, right 1, "
         "P 100.0, R 100.0"),
    ]


@pytest.mark.parametrize("name", ["epic_eval", "ud_eval"])
def test_a_report_that_is_a_folder_is_refused_before_any_work(name, tmp_path, capsys):
    code, _, err = run(name, ["--model-dir", str(tmp_path), "--report", str(tmp_path)], capsys)
    assert "--report" in one_error(code, err) and "is a folder; give a file name" in err


def test_heuristics_reports_refuse_a_folder(tmp_path, capsys):
    from heuristics.__main__ import main

    with pytest.raises(SystemExit) as stop:
        main(["eval-tagger", "--lang", "en", "--conllu", "C", "--report", str(tmp_path)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "--report" in err and "is a folder" in err
