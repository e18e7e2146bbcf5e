import pytest

from datasets_scripts.__main__ import main
from datasets_scripts.build_report import BuildError, Reporter


def test_skip_and_count_summary():
    reporter = Reporter(examples=2)
    for line in (3, 8, 9):
        reporter.problem("malformed line", "a.txt", f"line {line}", "x" * 200, "fix it")
    reporter.problem("duplicate id", "b.txt", "line 1", "v1")
    reporter.check_counts(
        "Src", {"videos/test": 3, "captions/test": 5}, {"videos/test": 3, "captions/test": 4}
    )
    assert reporter.skipped == 4
    summary = reporter.summary()
    assert (
        "skipped 4 bad record(s):\n  malformed line: 3\n    e.g. a.txt, line 3: malformed line: 'xxx"
        in summary
    )
    assert "a.txt, line 8" in summary and "a.txt, line 9" not in summary  # two examples per kind
    assert "xxx... (fix it)" in summary  # long values are cut
    assert (
        "warning: Src: counts differ from the published ones: captions/test: expected 5, got 4"
        in summary
    )
    assert reporter.as_dict()["skipped"] == {"malformed line": 3, "duplicate id": 1}


def test_strict_raises_on_problems_and_warnings():
    with pytest.raises(BuildError, match=r"^a.txt, line 2: bad: 'v' \[--strict"):
        Reporter(strict=True).problem("bad", "a.txt", "line 2", "v")
    with pytest.raises(BuildError, match="expected 3, got 2"):
        Reporter(strict=True).check_counts("S", {"videos/test": 3}, {"videos/test": 2})
    Reporter(strict=True).check_counts("S", {"videos/test": 3}, {"videos/test": 3})


def test_missing_release_files_are_named(tmp_path, capsys):
    code = main(["build", "msrvtt", "--src", str(tmp_path), "--out", str(tmp_path / "o")])
    assert code == 2 and "no MSRVTT_data.json" in capsys.readouterr().err
    code = main(["build", "rudder", "--src", str(tmp_path), "--out", str(tmp_path / "o")])
    assert code == 2 and "not a RUDDER release" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
