import hashlib
import json

import pytest

from datasets_scripts.__main__ import main
from rudder.data.layout import DatasetFolder


def test_real_test_file_builds_strict(shared_data, build, loads, tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "charades_sta_test.txt").write_bytes(
        (shared_data / "charades_sta" / "charades_sta_test.txt").read_bytes()
    )
    code, out = build("charades_sta", src, "--strict")
    assert code == 0
    assert "counts match the published ones" in capsys.readouterr().err
    folder = DatasetFolder(out)
    captions = folder.captions("test").to_pylist()
    assert len(captions) == 3720
    assert folder.videos("test").num_rows == 1334
    # First line of the file: "3MSZA 24.3 30.4##person turn a light on."
    first = captions[0]
    assert (first["caption_id"], first["video_id"], first["text"]) == (
        "3MSZA/0",
        "3MSZA",
        "person turn a light on.",
    )
    assert first["start"] == pytest.approx(24.3) and first["end"] == pytest.approx(30.4)
    assert first["lang"] == "en" and first["machine_translated"] is False
    loaded = loads(out, "captions")
    assert set(loaded) == {"test"} and loaded["test"].num_rows == 3720
    card = (out / "README.md").read_text()
    assert "@inproceedings{gao2017tall" in card and "--strict" in card


def _write_fixture(src):
    src.mkdir()
    train = [f"V{i:02d} 1.0 {2 + i % 3}.5##person opens door {i}." for i in range(20)]
    train += [
        "V00 2.0 3.0##person sits.",  # second moment of V00
        "garbage without separator",  # malformed
        "V01 a 3.0##bad start",  # not a number
        "V02 5.0 3.0##start after end",  # start > end
        "V03 1.0 99.0##beyond the video",  # end > duration 30
        "V04 1.0 3.5##person opens door 4.",  # duplicate of line 5
        "V05 1.0 2.0##   ",  # missing sentence
    ]
    (src / "charades_sta_train.txt").write_text("\n".join(train) + "\n")
    (src / "charades_sta_test.txt").write_text("T1 0.0 4.0##a person cooks.\nV07 1.0 2.0##clash.\n")
    durations = {f"V{i:02d}": {"duration": 30.0, "subset": "training"} for i in range(20)}
    durations["T1"] = 12.0
    (src / "charades.json").write_text(json.dumps(durations))


def test_bad_lines_skipped_and_counted(build, tmp_path, capsys):
    src = tmp_path / "src"
    _write_fixture(src)
    code, out = build("charades_sta", src)
    assert code == 0
    err = capsys.readouterr().err
    for kind in (
        "malformed line: 1",
        "time is not a number: 1",
        "time outside the video: 2",
        "duplicate moment: 1",
        "missing sentence: 1",
        "video in both train and test files: 1",
    ):
        assert kind in err
    assert "charades_sta_train.txt, line 24: time outside the video: '5.0 3.0'" in err
    assert "counts differ from the published ones" in err and "expected 3720, got 1" in err
    folder = DatasetFolder(out)
    # 20 train videos: the 2 with the smallest SHA-256 of the id are held out for validation.
    held = sorted(
        sorted(
            (f"V{i:02d}" for i in range(20)), key=lambda v: hashlib.sha256(v.encode()).hexdigest()
        )[:2]
    )
    assert sorted(folder.videos("validation")["video_id"].to_pylist()) == held
    assert folder.videos("train").num_rows == 18
    assert folder.videos("test")["video_id"].to_pylist() == ["T1"]  # V07 is a train video
    durations = dict(zip(*[folder.videos("test")[c].to_pylist() for c in ("video_id", "duration")]))
    assert durations == {"T1": 12.0}
    all_captions = sum(folder.captions(s).num_rows for s in ("train", "validation", "test"))
    assert all_captions == 20 + 1 + 1  # 20 first moments, V00's second, T1
    meta = json.loads((out / "rudder.json").read_text())
    assert meta["extra"]["build"]["skipped"]["time outside the video"] == 2


def test_strict_stops_and_leaves_nothing(tmp_path, capsys):
    src = tmp_path / "src"
    _write_fixture(src)
    out = tmp_path / "out"
    code = main(["build", "charades-sta", "--src", str(src), "--out", str(out), "--strict"])
    assert code == 2
    err = capsys.readouterr().err
    assert "charades_sta_train.txt, line 22: malformed line: 'garbage without separator'" in err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_existing_output_needs_overwrite(build, tmp_path, capsys):
    src = tmp_path / "src"
    _write_fixture(src)
    assert build("charades_sta", src)[0] == 0
    code, _ = build("charades_sta", src)
    assert code == 2 and "--overwrite" in capsys.readouterr().err
    assert build("charades_sta", src, "--overwrite")[0] == 0
