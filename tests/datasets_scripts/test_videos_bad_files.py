"""``build videos`` with awkward files: containers that start after 0, frames over
``--max-pixels``, and the report of many bad files (console counts per reason, the first 20
of each, the full list in ``OUT/build_report.txt``)."""

import json
import re

import pytest

pytest.importorskip("av")

from datasets_scripts.__main__ import main

from .video_files import write_video

FAST = ["--expert", "object=resnet18@random", "--expert", "audio=logmel", "--fps", "2",
        "--workers", "0"]
HEADER = "video_id,start,end,lang,text\n"


def build(src, captions, out, *flags):
    return main(["build", "videos", "--src", str(src), "--captions", str(captions),
                 "--out", str(out), *map(str, flags)])


def test_files_starting_after_zero_keep_their_captions_and_duration(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    write_video(src / "start7.mkv", frames=48, fps=12, offset=7.0)  # 4 s from 7 s
    write_video(src / "start05.mkv", frames=48, fps=12, offset=0.5)  # 4 s from 0.5 s
    write_video(src / "plain.mkv", frames=48, fps=12)
    captions = tmp_path / "c.csv"
    captions.write_text(HEADER + "".join(f"{s},,,en,all of {s}\n{s},1,3.5,en,part of {s}\n"
                                         for s in ("start7", "start05", "plain")))
    out = tmp_path / "out"
    assert build(src, captions, out, *FAST) == 0
    err = capsys.readouterr().err
    assert "truncated" not in err and "no bad records" in err
    meta = json.loads((out / "rudder.json").read_text())
    media = meta["extra"]["media"]
    for stem in ("start7", "start05", "plain"):
        assert media[stem]["end"] == pytest.approx(4.0, abs=0.01), stem
        assert media[f"{stem}_1.00_3.50"] == {"file": f"{stem}.mkv", "start": 1.0, "end": 3.5}
    assert meta["extra"]["dropped_captions"] == []
    import pyarrow.parquet as pq

    captions_table = pq.read_table(out / "captions" / "train.parquet").to_pylist()
    captions_table += [r for s in ("validation", "test") if (out / "captions" / f"{s}.parquet")
                       .exists() for r in pq.read_table(out / "captions" / f"{s}.parquet")
                       .to_pylist()]
    assert len(captions_table) == 6
    # the same frames and sound as the file without an offset
    import numpy as np

    features = {}
    for path in (out / "features").rglob("*.parquet"):
        for row in pq.read_table(path).to_pylist():
            features[path.parent.name, row["video_id"]] = np.asarray(row["feature"])
    for expert in ("object", "audio"):
        for item in ("", "_1.00_3.50"):
            plain = features[expert, f"plain{item}"]
            assert np.allclose(features[expert, f"start7{item}"], plain, atol=1e-4)
            assert np.allclose(features[expert, f"start05{item}"], plain, atol=1e-4)


def test_frames_over_max_pixels_are_skipped_before_decoding_and_retried_when_raised(
        tmp_path, capsys, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    write_video(src / "big.mp4", frames=12, size=(128, 96), audio=False)
    captions = tmp_path / "c.csv"
    captions.write_text(HEADER + "big,,,en,a big video\nbig,0,0.5,en,its start\n")
    out = tmp_path / "out"
    assert build(src, captions, out, *FAST, "--max-pixels", 128 * 96 - 1) == 2
    err = capsys.readouterr().err
    assert "frames over the pixel limit: 1" in err
    assert ("big.mp4, file: frames over the pixel limit: 'its frames are 128x96 (0.0 "
            "megapixels), over the limit of 12,287 pixels") in err
    assert "its 2 caption(s) are dropped; --max-pixels raises the limit" in err
    assert err.strip().splitlines()[-1] == ("error: no video could be read; nothing to build "
                                            "(see the problems above)")
    report = tmp_path / "out.parts" / "build_report.txt"
    assert "frames over the pixel limit: 1" in report.read_text()
    assert build(src, captions, out, *FAST, "--max-pixels", 128 * 96) == 0
    err = capsys.readouterr().err
    assert "already done" not in err  # the refused file was decoded again
    assert sorted(json.loads((out / "rudder.json").read_text())["extra"]["media"]) == [
        "big", "big_0.00_0.50"]
    assert not (tmp_path / "out.parts").exists()


def test_every_bad_file_and_dropped_caption_is_reported(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    write_video(src / "good.mp4", frames=24, audio=False)
    write_video(src / "large.mp4", frames=12, size=(96, 64), audio=False)
    rows = ["good,,,en,a good video", "large,,,en,too large", "good,5,6,en,after the end"]
    for i in range(25):
        (src / f"broken{i:02d}.mp4").write_bytes(b"junk" * 40)
        rows += [f"broken{i:02d},,,en,broken {i}", f"broken{i:02d},,,hi,टूटा {i}"]
    rows += [f"missing{i},,,en,no file" for i in range(22)]
    captions = tmp_path / "c.csv"
    captions.write_text(HEADER + "\n".join(rows) + "\n")
    out = tmp_path / "out"
    assert build(src, captions, out, *FAST, "--max-pixels", 64 * 48) == 0
    err = capsys.readouterr().err
    report = out / "build_report.txt"
    # counts per reason
    assert "  unreadable video: 25\n" in err
    assert "  no video file: 22\n" in err
    assert "  frames over the pixel limit: 1\n" in err
    assert "  segment outside the video: 1\n" in err
    # the first 20 of each, then how many more and where
    shown = re.findall(r"broken(\d\d)\.mp4, file: unreadable video", err)
    assert shown == [f"{i:02d}" for i in range(20)]
    assert f"    and 5 more: see {report}\n" in err
    assert f"    and 2 more: see {report}\n" in err
    # dropped captions as line ranges, never cut without saying so
    note = next(line for line in err.splitlines() if line.startswith("note: dropped"))
    assert note == (f"note: dropped 52 caption(s) of unreadable files or segments: {captions} "
                    "lines 3-54")
    text = report.read_text()
    assert all(f"broken{i:02d}.mp4, file: unreadable video" in text for i in range(25))
    assert all(f"line {i + 55}, field video_id: no video file" in text for i in range(22))
    dropped = re.findall(r", line (\d+): (\w+): ", text)
    assert sorted(int(n) for n, _ in dropped) == list(range(3, 55))
    assert f"the full report: {report}" in err
