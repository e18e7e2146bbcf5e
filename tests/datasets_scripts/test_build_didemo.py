import json
import shutil

import pytest

from rudder.data.layout import DatasetFolder

VIDEO = "35034348999@N01_6060447507_dc1a90b8ef"
MERGED = "33234611@N00_3567949618_0bee41c6f7"  # annotated as .mov and as .mp4


@pytest.fixture
def didemo_src(shared_data, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("val_data.json", "train_list.txt", "val_list.txt", "test_list.txt"):
        shutil.copy(shared_data / "didemo" / name, src / name)
    return src


def test_real_val_fused_paragraphs(didemo_src, build, loads, capsys):
    code, out = build("didemo", didemo_src, "--strict")
    assert code == 0
    err = capsys.readouterr().err
    assert "29 video(s) of val_data.json have annotations under several file names" in err
    assert "not in val_list.txt" not in err
    folder = DatasetFolder(out)
    videos = folder.videos("validation")
    assert videos.num_rows == 1065
    captions = {r["video_id"]: r for r in folder.captions("validation").to_pylist()}
    assert len(captions) == 1065
    row = captions[VIDEO]
    # Moments of this video, consensus times (hand-worked from val_data.json), ordered by
    # (start, end, annotation_id): 49152 [5,10], 51687 [5,10], 50067 [10,15],
    # 18360 [10,20] ((2,3) twice of four), 36044 [20,30].
    assert row["text"] == (
        "the man in the hat briefly bends over the machine a man with a hat looking at a wavy "
        "object. the man is waving his arm around man with hat waves right hand up and down "
        "man is holding his hat."
    )
    assert (row["kind"], row["start"], row["end"], row["caption_id"]) == (
        "paragraph",
        0.0,
        30.0,
        f"{VIDEO}/paragraph",
    )
    assert loads(out)["validation"].num_rows == 1065


def test_real_val_per_moment(didemo_src, build):
    code, out = build("didemo", didemo_src, "--per-moment", "--strict")
    assert code == 0
    captions = DatasetFolder(out).captions("validation").to_pylist()
    # Every moment is kept: the 71 moments filed under the 29 videos' unlisted second
    # container are merged into the listed video (--strict checks the kept count, 4,180).
    assert len(captions) == 4180
    merged = {r["caption_id"] for r in captions if r["video_id"] == MERGED}
    assert merged == {"45057", "61519", "38850", "61829", "24195"}  # .mov and .mp4 ones
    durations = DatasetFolder(out).videos("validation").to_pydict()
    duration = dict(zip(durations["video_id"], durations["duration"], strict=True))
    assert duration["79785633@N03_7901361222_8bb0dfc88f"] == 30.0  # 5 and 6 segments: longest
    mine = {r["caption_id"]: (r["start"], r["end"]) for r in captions if r["video_id"] == VIDEO}
    assert mine == {
        "49152": (5.0, 10.0),
        "51687": (5.0, 10.0),
        "50067": (10.0, 15.0),
        "18360": (10.0, 20.0),
        "36044": (20.0, 30.0),
    }


def _item(aid, video, times, text="a dog runs", segments=6):
    return {
        "annotation_id": aid,
        "description": text,
        "times": times,
        "video": video,
        "num_segments": segments,
        "dl_link": "x",
    }


def test_bad_entries_reported(tmp_path, build, capsys):
    src = tmp_path / "src"
    src.mkdir()
    data = [
        _item(1, "a.mp4", [[0, 1], [2, 2], [0, 1], [2, 2]], "first"),  # tie: first annotator's wins
        _item(2, "a.mp4", [[3, 3]], "second"),
        _item(3, "b.mov", [[0, 6], [1, 1]]),  # one pair outside 6 segments
        _item(3, "c.mov", [[0, 0]]),  # duplicate annotation_id
        {"annotation_id": 4, "video": "c.mov"},  # missing fields
        _item(5, "d.avi", [[7, 8]]),  # only pair outside -> dropped
        _item(6, "e.mp4", [[0, 0]], segments=5),
        _item(7, "e.mp4", [[1, 1]], segments=6),  # num_segments disagrees
    ]
    (src / "train_data.json").write_text(json.dumps(data))
    (src / "train_list.txt").write_text("a.mp4\nb.mov\ne.mp4\n\nzzz.mp4\n")  # blank line 4
    code, out = build("didemo", src, "--per-moment")
    assert code == 0
    err = capsys.readouterr().err
    assert "train_data.json, entry 2 (annotation_id 3): time outside the video: [0, 6]" in err
    assert "duplicate annotation_id: 1" in err and "missing field: 1" in err
    assert "train_list.txt, line 5: unknown video id in split list: 'zzz'" in err
    assert "num_segments differs between annotations: 1" in err
    assert "train videos (CE list): expected 8392, got 3" in err
    rows = {r["caption_id"]: r for r in DatasetFolder(out).captions("train").to_pylist()}
    assert sorted(rows) == ["1", "2", "3", "6"]
    assert (rows["1"]["start"], rows["1"]["end"]) == (0.0, 10.0)
    assert (rows["3"]["start"], rows["3"]["end"]) == (5.0, 10.0)
    code, out = build("didemo", src, "--overwrite")
    paragraph = DatasetFolder(out).captions("train").to_pylist()
    assert [r["text"] for r in paragraph if r["video_id"] == "a"] == ["first second"]


def test_containers_merged_and_kept_count_checked(tmp_path, build, capsys):
    src = tmp_path / "src"
    src.mkdir()
    data = [
        _item(1, "a.mp4", [[0, 0]], "a dog runs"),
        _item(2, "a.mov", [[0, 0]], "a dog runs"),  # the same annotation again: kept once
        _item(3, "a.mov", [[1, 1]], "a dog runs"),  # same words, other time: distinct
        _item(4, "a.", [[6, 6]], "a dog sits", segments=7),  # a third container, longer
        _item(5, "b.avi", [[0, 0]], "a cat", segments=5),
        {**_item(6, "b.avi", [[1, 1]], segments=5), "description": None},  # JSON null
    ]
    (src / "test_data.json").write_text(json.dumps(data))
    (src / "test_list.txt").write_text("a.mp4\nb.avi\n")
    code, out = build("didemo", src, "--per-moment")
    assert code == 0
    err = capsys.readouterr().err
    assert "entry 1 (annotation_id 2): same annotation under two file names of a video" in err
    assert "entry 5 (annotation_id 6): empty description: None" in err
    assert "1 video(s) of test_data.json have annotations under several file names" in err
    assert "test_data.json moments kept: expected 4021, got 4" in err
    folder = DatasetFolder(out)
    rows = folder.captions("test").to_pydict()
    assert sorted(rows["caption_id"]) == ["1", "3", "4", "5"]
    assert "None" not in rows["text"]
    videos = folder.videos("test").to_pydict()
    assert dict(zip(videos["video_id"], videos["duration"], strict=True)) == {"a": 35.0, "b": 25.0}


def test_non_utf8_release_files_are_named(tmp_path):
    from datasets_scripts.build import read_id_list, read_json
    from datasets_scripts.build_report import BuildError, Reporter

    path = tmp_path / "val_data.json"
    path.write_bytes('[{"description": "café"}]'.encode("cp1252"))
    with pytest.raises(BuildError, match=r"val_data.json: not UTF-8 text \(byte 0xe9 at offset "
                                         r"21\); re-save it as UTF-8"):
        read_json(path, "it as JSON")
    path = tmp_path / "val_list.txt"
    path.write_bytes("v1\nvidéo\n".encode("cp1252"))
    with pytest.raises(BuildError, match="val_list.txt: not UTF-8 text"):
        read_id_list(path, Reporter())
