import json
import shutil

import pytest

from rudder.data.layout import DatasetFolder

VIDEO = "35034348999@N01_6060447507_dc1a90b8ef"


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
    assert "29 video(s) of val_data.json are not in val_list.txt" in err
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
    assert len(captions) == 4109  # 4,180 moments minus those of the 29 unlisted copies
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
    (src / "train_list.txt").write_text("a.mp4\nb.mov\ne.mp4\nzzz.mp4\n")
    code, out = build("didemo", src, "--per-moment")
    assert code == 0
    err = capsys.readouterr().err
    assert "train_data.json, entry 2 (annotation_id 3): time outside the video: [0, 6]" in err
    assert "duplicate annotation_id: 1" in err and "missing field: 1" in err
    assert "train_list.txt, entry 4: unknown video id in split list: 'zzz.mp4'" in err
    assert "num_segments differs between annotations: 1" in err
    assert "train videos (CE list): expected 8392, got 3" in err
    rows = {r["caption_id"]: r for r in DatasetFolder(out).captions("train").to_pylist()}
    assert sorted(rows) == ["1", "2", "3", "6"]
    assert (rows["1"]["start"], rows["1"]["end"]) == (0.0, 10.0)
    assert (rows["3"]["start"], rows["3"]["end"]) == (5.0, 10.0)
    code, out = build("didemo", src, "--overwrite")
    paragraph = DatasetFolder(out).captions("train").to_pylist()
    assert [r["text"] for r in paragraph if r["video_id"] == "a"] == ["first second"]
