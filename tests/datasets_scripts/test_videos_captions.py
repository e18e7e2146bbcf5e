"""The captions file of ``build videos``: record boundaries, NUL bytes, clock times,
separators, ``video_id`` with its extension, and captions over the length limit, all found
before any video is decoded (``datasets_scripts.captions_table``)."""

import json

import pytest

from datasets_scripts.__main__ import main
from datasets_scripts.build import MAX_CAPTION_CHARS
from datasets_scripts.build_report import BuildError, Reporter
from datasets_scripts.captions_table import parse_time, read_captions

HEADER = "video_id,start,end,lang,text\n"


def rows_of(tmp_path, text: str, name="c.csv", newline=""):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    reporter = Reporter(examples=100)
    return read_captions(path, reporter), reporter


def test_only_cr_lf_and_crlf_end_a_record(tmp_path):
    text = (HEADER + 'a,,,en,"first\u2028second"\r\n'
            "b,,,en,cut\u0085here\r"
            "c,,,en,form\x0cfeed\u2029and\x1c more\n"
            'd,,,en,"two\nlines"\n')
    rows, reporter = rows_of(tmp_path, text)
    assert [(r.line, r.video_id, r.text) for r in rows] == [
        (2, "a", "first\u2028second"),
        (3, "b", "cut\u0085here"),
        (4, "c", "form\x0cfeed\u2029and\x1c more"),
        (5, "d", "two\nlines"),
    ]
    assert reporter.skipped == 0


def test_jsonl_records_end_only_at_line_ends(tmp_path):
    lines = [{"video_id": "a", "start": None, "end": None, "lang": "en",
              "text": "first\u2028second\u0085third"},
             {"video_id": "b", "start": 1, "end": 2, "lang": "hi", "text": "दो"}]
    text = "\r\n".join(json.dumps(r, ensure_ascii=False) for r in lines) + "\r"
    rows, _ = rows_of(tmp_path, text, "c.jsonl")
    assert [(r.line, r.text) for r in rows] == [(1, "first\u2028second\u0085third"), (2, "दो")]


@pytest.mark.parametrize("name", ["c.csv", "c.jsonl"])
def test_a_nul_byte_is_refused_naming_its_line(tmp_path, name):
    body = (HEADER + "a,,,en,fine\r\nb,,,en,bro\x00ken\n" if name == "c.csv" else
            '{"video_id": "a"}\n{"video_id": "b\x00"}\n')
    with pytest.raises(BuildError, match=r"c\.\w+, line 3: a NUL byte" if name == "c.csv"
                       else r"c\.jsonl, line 2: a NUL byte"):
        rows_of(tmp_path, body, name)


def test_utf16_without_a_bom_is_named_as_such(tmp_path):
    path = tmp_path / "c.csv"
    path.write_bytes((HEADER + "a,,,en,x\n").encode("utf-16-le"))
    with pytest.raises(BuildError, match="line 1: a NUL byte.*UTF-16.*re-save it as UTF-8"):
        read_captions(path, Reporter())


@pytest.mark.parametrize("cell, seconds", [
    ("12.5", 12.5), ("0:07", 7.0), ("1:02.5", 62.5), ("10:00", 600.0), ("1:00:02.25", 3602.25),
    ("0:00:00", 0.0), ("90", 90.0), ("2:5", 125.0), (" 1:02 ", 62.0), (".5", 0.5), ("0:.5", 0.5),
])
def test_clock_times(cell, seconds):
    assert parse_time(cell) == pytest.approx(seconds)


@pytest.mark.parametrize("cell", ["1:60", "1:61:00", "-0:05", "1::2", ":30", "1:2:3:4", "1:x",
                                  "nan", "inf", "1:02,5", "0x10"])
def test_bad_clock_times(cell):
    with pytest.raises(ValueError):
        parse_time(cell)


def test_times_in_a_file_may_be_clock_times(tmp_path):
    rows, reporter = rows_of(tmp_path, HEADER + "a,0:05,1:02.5,en,x\na,1:00,0:59,en,y\n"
                             "a,1:75,2:00,en,z\n")
    assert [(r.start, r.end) for r in rows] == [(5.0, 62.5)]
    assert "line 3, field end: segment is empty or negative" in reporter.report_text()
    assert ("line 4, field start: time is not a finite number: '1:75' (seconds (12.5) or "
            "m:ss / h:mm:ss (1:02.5)") in reporter.report_text()


def test_a_semicolon_file_is_read_with_decimal_commas(tmp_path):
    text = 'video_id;start;end;lang;text\na;1,5;3,25;en;"one; two, three"\nb;;;hi;चार\n'
    rows, reporter = rows_of(tmp_path, text)
    assert [(r.video_id, r.start, r.end, r.text) for r in rows] == [
        ("a", 1.5, 3.25, "one; two, three"), ("b", None, None, "चार")]
    assert reporter.skipped == 0
    tabs, _ = rows_of(tmp_path, "video_id\tstart\tend\tlang\ttext\na\t\t\ten\tx, y\n")
    assert [(r.video_id, r.text) for r in tabs] == [("a", "x, y")]


def test_an_unknown_separator_is_refused_saying_which_were_tried(tmp_path):
    with pytest.raises(BuildError, match=r"line 1: the header lacks column\(s\) \['video_id', "
                       r"'start', 'end', 'lang', 'text'\].*separated by commas, semicolons, tabs"):
        rows_of(tmp_path, "video_id|start|end|lang|text\na||||en|x\n")


def test_extra_fields_are_reported_not_cut(tmp_path):
    rows, reporter = rows_of(tmp_path, HEADER + "a,,,en,fold the paper, then cut it\n"
                             "b,,,en,fine\nc,,,en,a trailing separator,\n")
    assert [r.video_id for r in rows] == ["b", "c"]
    assert ("c.csv, line 2: more fields than the header: '6 fields, the header has 5' "
            "(quote a text that holds a comma") in reporter.report_text()


def test_a_caption_over_the_limit_is_a_bad_row_naming_its_line(tmp_path):
    long = "x" * (MAX_CAPTION_CHARS + 1)
    rows, reporter = rows_of(tmp_path, HEADER + f"a,,,en,short\na,,,en,{long}\n")
    assert [r.text for r in rows] == ["short"]
    report = reporter.report_text()
    assert f"c.csv, line 3, field text: caption over {MAX_CAPTION_CHARS:,d} characters" in report
    assert f"it has {MAX_CAPTION_CHARS + 1:,d}" in report
    # exactly at the limit is fine
    rows, _ = rows_of(tmp_path, HEADER + f"a,,,en,{'y' * MAX_CAPTION_CHARS}\n")
    assert len(rows[0].text) == MAX_CAPTION_CHARS


def test_an_open_quote_swallowing_the_file_is_named(tmp_path):
    body = HEADER + 'a,,,en,"an open quote\n' + "".join(f"b,,,en,row {i}\n" for i in range(9000))
    with pytest.raises(BuildError, match=r"c\.csv, line \d+: not a readable CSV file \(a field "
                       "over 131,072 characters.*close the quote"):
        rows_of(tmp_path, body)


# ------------------------------------------------------------------ through the build
pytest.importorskip("av")

FAST = ["--expert", "object=resnet18@random", "--fps", "0.5", "--workers", "0"]


def build(src, captions, out, *flags):
    return main(["build", "videos", "--src", str(src), "--captions", str(captions),
                 "--out", str(out), *map(str, flags)])


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    from .video_files import write_video

    folder = tmp_path_factory.mktemp("captions-src")
    write_video(folder / "a.mp4", frames=24, audio=False)
    write_video(folder / "b.mkv", frames=24, audio=False)
    write_video(folder / "b.webm", frames=12, audio=False)
    return folder


def test_a_long_caption_stops_a_strict_build_before_any_decoding(src, tmp_path, capsys,
                                                                 monkeypatch):
    import datasets_scripts.video_pipeline as pipeline

    def no_decoding(*args, **kwargs):
        raise AssertionError("a video was decoded before the captions were checked")

    monkeypatch.setattr(pipeline, "probe", no_decoding)
    captions = tmp_path / "c.csv"
    captions.write_text(HEADER + "a,,,en,fine\n" + f"a,,,en,{'x' * 100_000}\n", encoding="utf-8")
    out = tmp_path / "out"
    assert build(src, captions, out, *FAST, "--strict") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: {captions}, line 3, field text: caption over 20,000 "
                              "characters")
    assert "damaged" not in err[-1]
    assert not out.exists() and not (tmp_path / "out.parts").exists()


def test_a_long_caption_is_skipped_and_the_build_goes_on(src, tmp_path, capsys):
    captions = tmp_path / "c.csv"
    captions.write_text(HEADER + "a,,,en,fine\n" + f"a,,,en,{'x' * 100_000}\n", encoding="utf-8")
    out = tmp_path / "out"
    assert build(src, captions, out, *FAST) == 0
    err = capsys.readouterr().err
    assert f"{captions}, line 3, field text: caption over 20,000 characters" in err
    assert "it has 100,000" in err
    assert out.is_dir() and not (tmp_path / "out.parts").exists()
    assert "line 3, field text: caption over 20,000" in (out / "build_report.txt").read_text()


def test_video_ids_with_their_extension_and_clock_times(src, tmp_path, capsys):
    captions = tmp_path / "c.csv"
    captions.write_text(HEADER + "a.mp4,,,en,the whole of a\n"
                        "a,0:00.5,0:01.5,en,a segment of a\n"
                        "b.mkv,,,en,the mkv of b\n"
                        "b.webm,,,en,the webm of b\n"
                        "b.avi,,,en,no such file\n"
                        "b,,,en,which b\n", encoding="utf-8")
    out = tmp_path / "out"
    assert build(src, captions, out, *FAST) == 0
    err = capsys.readouterr().err
    assert ("line 5, field video_id: one video_id, two files: 'b.webm' (other rows name "
            "b.mkv)") in err
    assert ("line 6, field video_id: no video file: 'b.avi' (there is b.mkv or b.webm in "
            in err)
    assert ("line 7, field video_id: several files for one video_id: 'b' (b.mkv and b.webm: "
            "write the video_id with its extension)") in err
    media = json.loads((out / "rudder.json").read_text())["extra"]["media"]
    assert media == {"a": {"file": "a.mp4", "start": 0.0, "end": pytest.approx(2.0, abs=0.01)},
                     "a_0.50_1.50": {"file": "a.mp4", "start": 0.5, "end": 1.5},
                     "b": {"file": "b.mkv", "start": 0.0, "end": pytest.approx(2.0, abs=0.01)}}
