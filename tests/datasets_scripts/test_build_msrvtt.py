import json
import shutil

import pytest

from rudder.data.layout import DatasetFolder


@pytest.fixture
def msrvtt_src(shared_data, tmp_path):
    """MSRVTT_data.json for all 10,000 videos (split field from the real full lists), two
    sentences each with sen_ids in reverse order, beside the real 1k-A CSV and lists."""
    real = shared_data / "msrvtt"
    split_of = {}
    for name, split in (
        ("train_list_full.txt", "train"),
        ("val_list_full.txt", "validate"),
        ("test_list_full.txt", "test"),
    ):
        split_of.update(dict.fromkeys((real / name).read_text().split(), split))
    videos = [
        {
            "video_id": f"video{i}",
            "split": split_of[f"video{i}"],
            "start time": 1.5,
            "end time": 11.5 + i % 7,
            "category": 0,
            "id": i,
        }
        for i in range(10000)
    ]
    sentences = []
    for i in range(10000):
        sentences.append(
            {"video_id": f"video{i}", "caption": f"second sentence {i}", "sen_id": 20000 + i}
        )
        sentences.append({"video_id": f"video{i}", "caption": f"first sentence {i}", "sen_id": i})
    src = tmp_path / "src"
    src.mkdir()
    (src / "MSRVTT_data.json").write_text(json.dumps({"videos": videos, "sentences": sentences}))
    shutil.copy(real / "MSRVTT_JSFUSION_test.csv", src)
    return src, real


def test_full_split_counts_and_first_caption(msrvtt_src, build, loads, capsys):
    src, _ = msrvtt_src
    code, out = build("msrvtt", src, "--split", "full", "--captions-per-video", "1", "--strict")
    assert code == 0
    assert "MSR-VTT full: counts match the published ones" in capsys.readouterr().err
    folder = DatasetFolder(out)
    assert [folder.videos(s).num_rows for s in ("train", "validation", "test")] == [6513, 497, 2990]
    first = folder.captions("train").slice(0, 1).to_pylist()[0]
    # video0: the lowest sen_id (0) is kept; duration = end time - start time = 10 s.
    assert (first["caption_id"], first["text"], first["start"], first["end"]) == (
        "video0/0",
        "first sentence 0",
        0.0,
        10.0,
    )
    assert loads(out)["test"].num_rows == 2990


def test_1k_a_uses_the_csv_for_test(msrvtt_src, build, capsys):
    src, _ = msrvtt_src
    code, out = build("msrvtt", src, "--split", "1k-A")
    assert code == 0
    err = capsys.readouterr().err
    # 20 captions per video is the published count: two per video here is reported.
    assert "captions/train: expected 180000, got 18000" in err
    assert "videos/train: expected" not in err and "videos/test: expected" not in err
    folder = DatasetFolder(out)
    assert folder.videos("train").num_rows == 9000 and folder.videos("test").num_rows == 1000
    test = {r["video_id"]: r for r in folder.captions("test").to_pylist()}
    assert len(test) == 1000  # one CSV sentence per test video, none from the JSON
    assert test["video9770"]["caption_id"] == "video9770/ret0"
    assert test["video9770"]["text"] == "a person is connecting something to system"
    with pytest.raises(Exception, match="no 'validation' split"):
        folder.captions("validation")


def test_split_lists_and_unknown_ids(msrvtt_src, build, capsys, tmp_path):
    src, real = msrvtt_src
    val_list = tmp_path / "val.txt"
    val_list.write_text("video7020\nvideo7021\n\nvideo99999\nvideo7020\n")  # a blank line 3
    code, out = build(
        "msrvtt",
        src,
        "--split",
        "lists",
        "--split-lists",
        f"train={real / 'train_list_full.txt'}",
        f"validation={val_list}",
        f"test={real / 'test_list_full.txt'}",
        "--captions-per-video",
        "1",
    )
    assert code == 0
    err = capsys.readouterr().err
    assert "val.txt, line 4: unknown video id in split list: 'video99999'" in err
    assert "val.txt, line 5: duplicate id in split list: 'video7020'" in err
    assert "video in two split lists: 2" in err  # video7020/7021 are also in the test list
    folder = DatasetFolder(out)
    counts = [folder.videos(s).num_rows for s in ("train", "validation", "test")]
    assert counts == [6513, 2, 2988]


def test_bad_json_records(tmp_path, build, capsys):
    src = tmp_path / "src"
    src.mkdir()
    data = {
        "videos": [
            {"video_id": "video0", "split": "train", "start time": 0, "end time": 5},
            {"video_id": "video0", "split": "train"},
            {"video_id": "video1", "split": "holdout", "start time": 0, "end time": 5},
            {"video_id": "video2", "split": "test", "start time": 5, "end time": 5},
            {"video_id": "video3", "split": "test", "start time": 0, "end time": float("nan")},
        ],
        "sentences": [
            {"video_id": "video0", "caption": "a cat", "sen_id": 0},
            {"video_id": "video0", "caption": "a dog", "sen_id": 0},
            {"video_id": "video9", "caption": "who", "sen_id": 1},
            {"video_id": "video0", "sen_id": 2},
            {"video_id": "video0", "caption": None, "sen_id": 3},
        ],
    }
    (src / "train_val_videodatainfo.json").write_text(json.dumps(data))
    code, out = build("msrvtt", src)
    assert code == 0
    err = capsys.readouterr().err
    for message in (
        "videos[1]: duplicate video id: 'video0'",
        "videos[2]: unknown split: 'holdout'",
        "videos[3]: time outside the video: [5, 5]",
        "sentences[1]: duplicate sen_id: 0",
        "sentences[2]: sentence of an unknown video: 'video9'",
        "sentences[3]: missing field",
        "videos[4]: duration is not a finite number: [0, nan]",
        "sentences[4]: empty caption: None",
    ):
        assert message in err
    assert DatasetFolder(out).captions("train")["text"].to_pylist() == ["a cat"]


def _with_lists(src, real, *names):
    for name in names:
        shutil.copy(real / name, src)
    return src


def test_1k_a_one_caption_from_the_jsfusion_lists(msrvtt_src, build, loads, capsys):
    src, real = msrvtt_src
    _with_lists(src, real, "train_list_jsfusion.txt", "val_list_jsfusion.txt")
    code, out = build("msrvtt", src, "--split", "1k-A", "--captions-per-video", "1", "--strict")
    assert code == 0
    assert "MSR-VTT 1k-A: counts match the published ones (4 checked)" in capsys.readouterr().err
    folder = DatasetFolder(out)
    train = folder.captions("train").to_pydict()
    assert len(train["video_id"]) == len(set(train["video_id"])) == 9000
    assert set(train["video_id"]) == set((real / "train_list_jsfusion.txt").read_text().split())
    assert loads(out)["test"].num_rows == 1000


def test_1k_a_test_split_from_the_csv_alone(shared_data, tmp_path, build, capsys):
    real = shared_data / "msrvtt"
    src = tmp_path / "src"
    src.mkdir()
    _with_lists(src, real, "MSRVTT_JSFUSION_test.csv", "val_list_jsfusion.txt")
    code, out = build("msrvtt", src, "--split", "1k-A", "--captions-per-video", "1", "--strict")
    assert code == 0
    err = capsys.readouterr().err
    assert "no annotation JSON: only the test split is built" in err
    assert "counts match the published ones (2 checked)" in err
    folder = DatasetFolder(out)
    assert (folder.videos("test").num_rows == 1000
            and not (out / "videos" / "train.parquet").exists())
    first = folder.captions("test").slice(0, 1).to_pylist()[0]
    assert (first["caption_id"], first["text"], first["end"]) == (
        "video9770/ret0",
        "a person is connecting something to system",
        None,
    )


def test_unterminated_quote_in_the_csv_is_named(shared_data, tmp_path, build, capsys):
    lines = (shared_data / "msrvtt" / "MSRVTT_JSFUSION_test.csv").read_text().splitlines()
    lines[15] = lines[15].replace(",a rocket", ',"a rocket')  # line 16 of the file
    src = tmp_path / "src"
    src.mkdir()
    (src / "MSRVTT_JSFUSION_test.csv").write_text("\n".join(lines) + "\n")
    code, out = build("msrvtt", src, "--split", "1k-A")
    assert code == 2
    err = capsys.readouterr().err
    assert "MSRVTT_JSFUSION_test.csv, line 16: a quoted field runs over lines 16-1001" in err
    assert "unterminated quote" in err and not out.exists()


def test_text_feature_pickle_becomes_the_text_features_config(msrvtt_src, build, loads, tmp_path):
    import pickle

    import numpy as np

    src, _ = msrvtt_src
    # CE's layout: video id -> the video's captions' (tokens, D) arrays, in release (sen_id) order.
    table = {f"video{i}": [np.full((1 + k, 3), 10.0 * i + k, np.float32) for k in range(2)]
             for i in range(10000)}
    pickle_path = tmp_path / "w2v_MSRVTT.pickle"
    pickle_path.write_bytes(pickle.dumps(table))
    code, out = build("msrvtt", src, "--split", "full", "--text-features", pickle_path)
    assert code == 0
    rows = loads(out, "text_features")["train"]
    by_id = {r["caption_id"]: np.array(r["feature"]) for r in rows.select(range(4))}
    captions = DatasetFolder(out).captions("train").slice(0, 2).to_pylist()
    assert [c["caption_id"] for c in captions] == ["video0/0", "video0/20000"]  # sen_id order
    assert by_id["video0/0"].shape == (1, 3) and (by_id["video0/0"] == 0.0).all()
    assert by_id["video0/20000"].shape == (2, 3) and (by_id["video0/20000"] == 1.0).all()
    del table["video7"]
    pickle_path.write_bytes(pickle.dumps(table))
    code, _ = build("msrvtt", src, "--split", "full", "--text-features", pickle_path,
                    out=tmp_path / "again")
    assert code == 2 and not (tmp_path / "again").exists()


def test_1k_a_test_captions_take_their_own_text_features(msrvtt_src, build, loads, tmp_path):
    import csv
    import pickle

    import numpy as np

    src, _ = msrvtt_src
    data = json.loads((src / "MSRVTT_data.json").read_text())
    with open(src / "MSRVTT_JSFUSION_test.csv", newline="") as handle:
        sentence_of = {row["video_id"]: row["sentence"] for row in csv.DictReader(handle)}
    for item in data["sentences"]:  # JSFusion sampled the second caption (sen_id order)
        if item["sen_id"] >= 20000 and item["video_id"] in sentence_of:
            item["caption"] = sentence_of[item["video_id"]].upper() + "  "  # case, spacing
    (src / "MSRVTT_data.json").write_text(json.dumps(data))
    table = {f"video{i}": [np.full((1, 2), 10.0 * i + k, np.float32) for k in range(2)]
             for i in range(10000)}
    pickle_path = tmp_path / "w2v_MSRVTT.pickle"
    pickle_path.write_bytes(pickle.dumps(table))
    code, out = build("msrvtt", src, "--split", "1k-A", "--text-features", pickle_path)
    assert code == 0
    test = {r["caption_id"]: r["feature"] for r in loads(out, "text_features")["test"]}
    assert np.array(test["video9770/ret0"]).tolist() == [[97701.0, 97701.0]]  # entry 1, not 0
    # a test sentence that is not among its video's captions has no known feature
    data["sentences"] = [s for s in data["sentences"]
                         if not (s["video_id"] == "video9770" and s["sen_id"] >= 20000)]
    (src / "MSRVTT_data.json").write_text(json.dumps(data))
    code, _ = build("msrvtt", src, "--split", "1k-A", "--text-features", pickle_path,
                    out=tmp_path / "again")
    assert code == 2 and not (tmp_path / "again").exists()
