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
        "V03 1.0 99.0##beyond the video",  # end > duration 30: clipped to 30
        "V06 40.0 45.0##after the video",  # starts after the video's 30 s
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
    assert "charades_sta_train.txt: 1 moment(s) ending after their video's duration" in err
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
    test = folder.videos("test")
    durations = dict(zip(test["video_id"].to_pylist(), test["duration"].to_pylist(), strict=True))
    assert durations == {"T1": 12.0}
    all_captions = sum(folder.captions(s).num_rows for s in ("train", "validation", "test"))
    assert all_captions == 20 + 1 + 1 + 1  # 20 first moments, V00's second, V03's clipped, T1
    clipped = [c for s in ("train", "validation") for c in folder.captions(s).to_pylist()
               if c["text"] == "beyond the video"]
    assert [(c["start"], c["end"]) for c in clipped] == [(1.0, 30.0)]
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


def test_nan_and_inf_times_are_named(tmp_path, build, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "charades_sta_test.txt").write_text(
        "T1 0.0 4.0##a person cooks.\nT1 nan 4.0##not a time.\nT2 1.0 inf##nor this.\n"
    )
    code, out = build("charades_sta", src)
    assert code == 0
    err = capsys.readouterr().err
    assert "charades_sta_test.txt, line 2: time is not a finite number: 'nan 4.0'" in err
    assert "time is not a finite number: 2" in err
    assert DatasetFolder(out).captions("test")["text"].to_pylist() == ["a person cooks."]
    code, _ = build("charades_sta", src, "--strict", "--overwrite")
    assert code == 2 and "line 2: time is not a finite number" in capsys.readouterr().err
    (src / "charades.json").write_text('{"T1": NaN}')
    code, _ = build("charades_sta", src, "--overwrite")
    assert code == 2 and ("video 'T1' has no positive finite duration (nan)"
                          in capsys.readouterr().err)


def _moments(path):
    """Distinct (video, start, end) of an STA file in file order, with their sentences."""
    moments = {}
    for line in path.read_text().splitlines():
        head, sentence = line.split("##")
        moments.setdefault(tuple(head.split()), []).append(sentence.strip())
    return moments


SPLIT_FILES = (("train", "train"), ("validation", "val"), ("test", "test"))


def test_rudder_clip_protocol_counts(shared_data, tmp_path, build, loads, capsys):
    """3,124 / 121 / 1,015 clips: test and validation from the real test file, train from a
    train file in the published format (the real one is not shipped)."""
    src = tmp_path / "src"
    src.mkdir()
    real = (shared_data / "charades_sta" / "charades_sta_test.txt").read_text()
    (src / "charades_sta_test.txt").write_text(real)
    train = [f"TR{i:04d} 0.0 {5 + i % 4}.5##person number {i} opens a door." for i in range(3124)]
    (src / "charades_sta_train.txt").write_text("\n".join(train) + "\n")
    moments = list(_moments(src / "charades_sta_test.txt"))
    (tmp_path / "test.txt").write_text("\n".join(" ".join(m) for m in moments[:1015]) + "\n")
    (tmp_path / "val.txt").write_text(
        "# held out\n" + "\n".join(" ".join(m) for m in moments[1015:1136]) + "\n"
    )
    (tmp_path / "train.txt").write_text("\n".join(line.split("##")[0] for line in train))
    lists = [f"{split}={tmp_path / name}.txt" for split, name in SPLIT_FILES]
    code, out = build("charades_sta", src, "--clip-lists", *lists, "--strict")
    assert code == 0
    err = capsys.readouterr().err
    assert "Charades-STA clips (RUDDER protocol): counts match the published ones (6" in err
    several = sum(len(s) > 1 for s in _moments(src / "charades_sta_test.txt").values())
    assert several > 0 and "listed clip(s) have several sentences and name none" in err
    folder = DatasetFolder(out)
    assert [folder.videos(s).num_rows for s in ("train", "validation", "test")] == [3124, 121, 1015]
    first = folder.captions("test").slice(0, 1).to_pylist()[0]
    # First line of the file: "3MSZA 24.3 30.4##person turn a light on." (3 sentences share it)
    assert (first["video_id"], first["caption_id"], first["text"]) == (
        "3MSZA_24.30_30.40",
        "3MSZA_24.30_30.40/0",
        "person turn a light on.",
    )
    assert first["start"] == 0.0 and first["end"] == pytest.approx(6.1)
    assert loads(out)["validation"].num_rows == 121


def test_clip_list_errors(tmp_path, build, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "charades_sta_test.txt").write_text(
        "A 1.0 2.0##one.\nA 1.0 2.0##two.\nB 0.0 3.0##three.\n"
    )
    (tmp_path / "test.txt").write_text(
        "A 1 2.00##two.\nA 1.0 2.0\nB 0.0 3.0##four.\nC 0.0 1.0\nB nan 3.0\n"
    )
    (tmp_path / "train.txt").write_text("B 0.0 3.0\n")
    lists = [f"test={tmp_path / 'test.txt'}", f"train={tmp_path / 'train.txt'}"]
    code, out = build("charades_sta", src, "--clip-lists", *lists)
    assert code == 0
    err = capsys.readouterr().err
    for message in (
        "test.txt, line 2: clip listed twice: 'A_1.00_2.00' (in test already)",
        "test.txt, line 3: sentence not of this clip: 'four.'",
        "test.txt, line 4: clip not in the STA files: 'C_0.00_1.00'",
        "test.txt, line 5: malformed clip line: 'B nan 3.0'",
        "videos/test: expected 1015, got 1",
    ):
        assert message in err
    folder = DatasetFolder(out)
    assert folder.captions("test")["text"].to_pylist() == ["two."]
    assert folder.captions("train")["text"].to_pylist() == ["three."]
    assert "1 listed clip(s) have several sentences" not in err  # B has one sentence


def test_a_caption_over_the_length_limit_stops_the_build(build, tmp_path, capsys):
    """A 400 MB caption line was built (4.2 GB peak): over MAX_CAPTION_CHARS the
    build stops naming the caption, and writes nothing."""
    from datasets_scripts.build import MAX_CAPTION_CHARS

    src = tmp_path / "src"
    src.mkdir()
    long = "a " * (MAX_CAPTION_CHARS // 2 + 1)
    (src / "charades_sta_test.txt").write_text(f"A1 0.0 4.0##ok.\nB2 1.0 3.0##{long}\n")
    code, out = build("charades_sta", src)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("error: caption 'B2/0' (video 'B2') has ")
    assert f"over the limit of {MAX_CAPTION_CHARS:,d}" in err[-1] and not out.exists()
