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
        "skipped 4 bad record(s):\n  malformed line: 3\n"
        "    e.g. a.txt, line 3: malformed line: 'xxx"
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


def test_line_ranges_say_what_they_leave_out():
    from datasets_scripts.build_report import line_ranges

    assert line_ranges([9, 3, 4, 5, 12, 11]) == "3-5, 9, 11-12"
    assert line_ranges(range(2, 100, 2), limit=3, report="r.txt") == (
        "2, 4, 6 and 46 more line(s): see r.txt")
    assert line_ranges([1, 5], limit=1) == "1 and 1 more line(s)"


def test_the_summary_says_how_many_more_and_where():
    reporter = Reporter(examples=2)
    for line in range(5):
        reporter.problem("bad", "a.txt", f"line {line}", "x")
    assert "    and 3 more: see out/report.txt" in reporter.summary("out/report.txt")
    assert "and 3 more" not in reporter.summary(everything=True)
    assert all(f"a.txt, line {n}: bad" in reporter.report_text() for n in range(5))
