import hashlib
import pickle

import numpy as np
import pyarrow.parquet as pq
import pytest

from rudder.data.layout import DatasetFolder

h5py = pytest.importorskip("h5py")


def _tsv(path, header, rows):
    path.write_text(
        "\n".join(["\t".join(header)] + ["\t".join(map(str, r)) for r in rows]) + "\n",
        encoding="utf-8",
    )


def make_folder_release(src):
    """Four videos, Marathi and English captions with manual marks, relations, three experts
    in the three feature formats (npy folder, HDF5, CE pickle)."""
    src.mkdir()
    _tsv(
        src / "videos.tsv",
        ["video_id", "split", "duration"],
        [
            ["v1", "train", 20],
            ["v2", "train", 20],
            ["v3", "validation", ""],
            ["v4", "test", 10],
            ["v5", "test", "inf"],  # not a duration
        ],
    )
    _tsv(
        src / "captions_mr.tsv",
        ["video_id", "text", "start", "end", "kind", "nouns", "verbs"],
        [
            ["v1", "बाटली कापा", 0, 5, "caption", "बाटली", "कापणे"],
            ["v1", "कात्री आणि गोंद", 5, 9, "listing", "कात्री|गोंद", ""],
            ["v2", "कागद दुमडा", 0, 4, "caption", "कागद", "दुमडणे"],
            ["v3", "रंग द्या", 0, 3, "caption", "रंग", "देणे"],
            ["v4", "चित्र काढा", 0, 3, "caption", "चित्र", "काढणे"],
            ["v9", "नाही", 0, 1, "caption", "", ""],  # unknown video
            ["v2", "उशीरा", 15, 25, "caption", "", ""],  # end after the 20 s video
            ["v2", "प्रकार", 0, 1, "song", "", ""],  # unknown kind
            ["v2", "वेळ नाही", "nan", 1, "caption", "", ""],  # NaN time
        ],
    )
    _tsv(
        src / "captions_en.tsv",
        ["video_id", "text", "start", "end", "kind", "caption_id", "machine_translated"],
        [
            ["v1", "cut the bottle", 0, 5, "caption", "en-1", "false"],
            ["v4", "draw a picture", 0, 3, "caption", "en-4", "true"],
            ["v4", "again", 0, 3, "caption", "en-1", ""],  # duplicate caption id
        ],
    )
    _tsv(
        src / "captions_kn.tsv",
        ["video_id", "text", "start", "end", "kind"],
        [["v1", "x", 0, 1, "caption"]],
    )
    (src / "relations.csv").write_text(
        "caption_id_a,caption_id_b,label,annotator\n"
        "v1/mr/0,v2/mr/0,partial,a1\nv1/mr/0,en-1,2,a1\nv1/mr/0,nope,1,a1\nv1/mr/1,v4/mr/0,7,a2\n"
    )
    features = src / "features"
    (features / "scene").mkdir(parents=True)
    for i, vid in enumerate(["v1", "v2", "v3"]):  # v4 has no scene feature
        np.save(features / "scene" / f"{vid}.npy", np.full(4, i + 1, np.float32))
    with h5py.File(features / "audio@mr.h5", "w") as handle:
        handle["v1"] = np.ones((3, 2), np.float32)
        handle["v2"] = np.ones((5, 2), np.float32)
        handle["v4"] = np.ones((2, 3), np.float32)  # wrong dimension
    ce = {
        "v1": np.arange(3.0),
        "v2": np.nan,
        "v3": np.array([1.0, np.nan, 2.0]),
        "v4": np.arange(3.0) + 1,
    }
    (features / "aggregated_imagenet_25fps").mkdir()
    with open(features / "aggregated_imagenet_25fps" / "senet154-avg.pickle", "wb") as handle:
        pickle.dump(ce, handle)
    return src


def test_folder_layout(tmp_path, build, loads, capsys):
    src = make_folder_release(tmp_path / "src")
    code, out = build("rudder", src)
    assert code == 0
    err = capsys.readouterr().err
    for message in (
        "captions_mr.tsv, line 7: unknown video id: 'v9'",
        ("captions_mr.tsv, line 8: time outside the video: '15.0 25.0' "
         "(need 0 <= start <= end <= duration 20.0)"),
        "line 9: unknown caption kind: 'song'",
        "captions_mr.tsv, line 10: not a finite number: 'nan' (column start)",
        "videos.tsv, line 6: not a finite number: 'inf' (column duration)",
        "captions_en.tsv, line 4: duplicate caption id: 'en-1'",
        "captions_kn.tsv, file name: unsupported language: 'kn'",
        "relations.csv, line 4: unknown caption id: 'nope'",
        "line 5: unknown label: '7'",
        "audio@mr.h5, dataset 'v4': wrong feature dimension",
        "senet154-avg.pickle, key 'v3': feature has NaN or inf",
    ):
        assert message in err, message
    folder = DatasetFolder(out)
    assert folder.meta.languages == ["mr", "en"]
    assert {e: (i.dim, i.variable_length) for e, i in folder.meta.experts.items()} == {
        "scene": (4, False),
        "audio@mr": (2, True),
        "object": (3, False),
    }
    train = {r["caption_id"]: r for r in folder.captions("train").to_pylist()}
    assert train["v1/mr/1"]["nouns"] == ["कात्री", "गोंद"] and train["v1/mr/1"]["verbs"] == []
    assert train["v1/mr/1"]["kind"] == "listing"
    assert train["en-1"]["nouns"] is None and train["en-1"]["machine_translated"] is False
    test = {r["caption_id"]: r["machine_translated"] for r in folder.captions("test").to_pylist()}
    assert test == {"v4/mr/0": False, "en-4": True}
    experts = {
        r["video_id"]: r["experts"]
        for s in ("train", "validation", "test")
        for r in folder.videos(s).to_pylist()
    }
    # v2's CE entry is NaN (missing), v3's is partly NaN (bad), v4 lacks scene and has a bad audio.
    assert experts == {
        "v1": ["audio@mr", "object", "scene"],
        "v2": ["audio@mr", "scene"],
        "v3": ["scene"],
        "v4": ["object"],
    }
    assert folder.videos("validation")["duration"].to_pylist() == [None]
    relations = folder.relations().to_pylist()
    assert [(r["caption_id_a"], r["caption_id_b"], r["label"]) for r in relations] == [
        ("v1/mr/0", "v2/mr/0", 1),
        ("v1/mr/0", "en-1", 2),
    ]
    scene = loads(out, "features.scene")
    assert scene["train"]["feature"] == [[1.0] * 4, [2.0] * 4]
    assert len(loads(out, "features.audio@mr")["train"][1]["feature"]) == 5
    assert loads(out, "relations")["train"].num_rows == 2
    assert loads(out)["train"].num_rows == 4  # captions: v1 x2 (mr), v2 (mr), en-1
    card = (out / "README.md").read_text()
    assert (
        "- `features.audio@mr`: `video_id` (string), `feature` (float32 (n, 2) per video)" in card
    )
    assert "`nouns` (list<item: string>)" in card and "@article{akula2021rudder" in card


def test_folder_layout_strict_fails_cleanly(tmp_path, build, capsys):
    src = make_folder_release(tmp_path / "src")
    code, out = build("rudder", src, "--strict")
    assert code == 2 and not out.exists()
    # captions_en.tsv is read first (files in name order)
    assert (
        "captions_en.tsv, line 4: duplicate caption id: 'en-1' [--strict" in capsys.readouterr().err
    )


def _records(ids, rng, langs=("mr", "hi", "ta")):
    records = []
    for i, vid in enumerate(ids):
        captions = {lang: f"{lang} caption {vid}" for lang in langs}
        captions["kn"] = "ಕನ್ನಡ"
        audios = {"mr": rng.random((3 + i % 2, 4)).astype(np.float32)}
        if i % 4 == 0:
            audios["hi"] = rng.random((2, 4))
        records.append({"id": vid, "2d": rng.random(6), "captions": captions, "audios": audios})
    return records


def test_public_loader_pickles(tmp_path, build, loads, capsys):
    rng = np.random.default_rng(0)
    src = tmp_path / "src"
    src.mkdir()
    train = _records([f"t{i}" for i in range(10)], rng)
    test = _records(["x0", "x1", "t3"], rng)  # t3 repeats a training id
    test[1]["captions"]["hi"] = None  # a null caption is reported, not stored as "None"
    test[1]["captions"]["te"] = ["te one", None]
    for name, records in (("rudder_train.pkl", train), ("rudder_test.pkl", test)):
        with open(src / name, "wb") as handle:
            pickle.dump(records, handle)
    code, out = build("rudder", src, "--visual-expert", "scene")
    assert code == 0
    err = capsys.readouterr().err
    assert "rudder_test.pkl, record 2: duplicate video id: 't3'" in err
    assert "unsupported language: 12" in err  # the 'kn' caption of the 12 distinct records
    assert "rudder_test.pkl, record 1 captions['hi']: empty caption: None" in err
    assert "rudder_test.pkl, record 1 captions['te'][1]: empty caption: None" in err
    folder = DatasetFolder(out)
    assert sorted(folder.experts) == ["audio@hi", "audio@mr", "scene"]
    held = min((f"t{i}" for i in range(10)), key=lambda v: hashlib.sha256(v.encode()).hexdigest())
    assert folder.videos("validation")["video_id"].to_pylist() == [held]
    test_captions = folder.captions("test").to_pylist()
    assert [(r["caption_id"], r["machine_translated"]) for r in test_captions[:3]] == [
        ("x0/mr/0", False),
        ("x0/hi/0", False),
        ("x0/ta/0", True),
    ]
    assert test_captions[0]["end"] is None
    scene = {r["video_id"]: r["feature"] for r in folder.features("scene", "test").to_pylist()}
    np.testing.assert_allclose(scene["x1"], test[1]["2d"], rtol=1e-6)
    audio = folder.features("audio@mr", "train").to_pylist()
    assert np.asarray(audio[0]["feature"]).shape[1] == 4
    assert loads(out, "features.audio@hi")["train"].num_rows == 3  # t0, t4, t8
    texts = folder.captions("test")["text"].to_pylist()
    assert "None" not in texts and "te one" in texts
    assert loads(out)["test"].num_rows == 6  # x0: mr, hi, ta; x1: mr, ta, te


def test_a_built_folder_trains_with_rudder_train(tmp_path, build):
    """The builder's output is what `python -m rudder.train --dataset OUT` reads."""
    from rudder import train

    src = tmp_path / "src"
    make_folder_release(src)
    code, out = build("rudder", src)
    assert code == 0
    result = train.main(["--dataset", str(out), "--output-dir", str(tmp_path / "run"),
                         "--epochs", "1",
                         "--set", "data.batch_size=2", "--set", "data.caption_langs=[mr, en]",
                         "--set", "model.shared_dim=8", "--set", "model.word_dim=4"])
    assert 0 <= result["test"]["t2v"]["R1"] <= 100


def test_text_features_cover_the_english_captions(tmp_path, build, loads):
    """A CE text pickle encodes English captions: entry k is the video's k-th English caption,
    whatever Marathi captions come before it; Marathi captions get no text features."""
    src = make_folder_release(tmp_path / "src")
    pickle_path = tmp_path / "w2v.pickle"
    pickle_path.write_bytes(pickle.dumps({
        "v1": [np.full((2, 3), 1.0, np.float32)], "v4": [np.full((1, 3), 4.0, np.float32)]}))
    code, out = build("rudder", src, "--text-features", pickle_path)
    assert code == 0
    rows = {r["caption_id"]: np.array(r["feature"])
            for split in ("train", "test") for r in loads(out, "text_features")[split]}
    assert sorted(rows) == ["en-1", "en-4"]
    assert (rows["en-1"] == 1.0).all() and rows["en-1"].shape == (2, 3)
    assert (rows["en-4"] == 4.0).all() and rows["en-4"].shape == (1, 3)
    card = (out / "README.md").read_text()
    assert "- `text_features`: `caption_id` (string), `feature` (float32 (n, 3) per caption" in card


def test_a_skipped_line_keeps_its_caption_id(tmp_path, build, capsys):
    """Implicit ids number a video's lines before validation: a skipped line leaves a gap, so
    relations and CE text-feature entries of the later lines still reach their own captions."""
    src = tmp_path / "src"
    src.mkdir()
    _tsv(src / "videos.tsv", ["video_id", "split", "duration"], [["v1", "train", 10],
                                                                  ["v2", "train", 10]])
    _tsv(src / "captions_en.tsv", ["video_id", "text", "start", "end", "kind"], [
        ["v1", "cut the bottle", 0, 50, "caption"],  # ends after the video: skipped
        ["v1", "fold the paper", 0, 5, "caption"],
        ["v2", "cut a bottle", 0, 5, "caption"],
    ])
    (src / "relations.csv").write_text(
        "caption_id_a,caption_id_b,label\nv1/en/0,v2/en/0,positive\nv1/en/1,v2/en/0,negative\n"
    )
    text = tmp_path / "text.pickle"
    text.write_bytes(pickle.dumps({"v1": [np.zeros((1, 2), np.float32),
                                          np.ones((1, 2), np.float32)],
                                   "v2": [np.full((1, 2), 2.0, np.float32)]}))
    code, out = build("rudder", src, "--text-features", text)
    assert code == 0
    assert "relations.csv, line 2: unknown caption id: 'v1/en/0'" in capsys.readouterr().err
    folder = DatasetFolder(out)
    captions = {r["caption_id"]: r["text"] for r in folder.captions("train").to_pylist()}
    assert captions == {"v1/en/1": "fold the paper", "v2/en/0": "cut a bottle"}
    relations = [tuple(r.values())[:3] for r in folder.relations().to_pylist()]
    assert relations == [("v1/en/1", "v2/en/0", 0)]
    features = pq.read_table(out / "text_features" / "train.parquet").to_pylist()
    assert {r["caption_id"]: r["feature"] for r in features} == {
        "v1/en/1": [[1.0, 1.0]], "v2/en/0": [[2.0, 2.0]]}


def test_short_rows_leave_optional_columns_empty(tmp_path, build):
    """A line that omits trailing optional cells (nouns, verbs) is read, with empty marks."""
    src = tmp_path / "src"
    src.mkdir()
    _tsv(src / "videos.tsv", ["video_id", "split"], [["v1", "train"]])
    (src / "captions_mr.tsv").write_text(
        "video_id\ttext\tstart\tend\tkind\tnouns\tverbs\n"
        "v1\tबाटली कापा\t0\t5\tcaption\tबाटली\n"
        "v1\tकागद दुमडा\t0\t5\tcaption\n",
        encoding="utf-8",
    )
    code, out = build("rudder", src)
    assert code == 0
    rows = DatasetFolder(out).captions("train").to_pylist()
    assert [(r["nouns"], r["verbs"]) for r in rows] == [(["बाटली"], []), ([], [])]


def test_no_empty_configs(tmp_path, build, capsys):
    """A relations.csv with no valid row gives no relations config (datasets cannot load a
    0-row one); a build where every caption is skipped stops with an error."""
    src = tmp_path / "src"
    src.mkdir()
    _tsv(src / "videos.tsv", ["video_id", "split"], [["v1", "train"]])
    _tsv(src / "captions_en.tsv", ["video_id", "text", "start", "end", "kind"],
         [["v1", "cut", 0, 5, "caption"]])
    (src / "relations.csv").write_text("caption_id_a,caption_id_b,label\nv1/en/0,nope,2\n")
    code, out = build("rudder", src)
    assert code == 0
    assert "relations: no valid row was read" in capsys.readouterr().err
    assert not (out / "relations").exists() and DatasetFolder(out).relations() is None
    assert "config_name: relations" not in (out / "README.md").read_text()
    _tsv(src / "captions_en.tsv", ["video_id", "text", "start", "end", "kind"],
         [["v1", "cut", 0, 5, "song"]])
    code, out = build("rudder", src, out=tmp_path / "no-captions")
    assert code == 2 and not out.exists()
    assert "error: rudder: no captions were read" in capsys.readouterr().err


def _small_release(src):
    src.mkdir(parents=True)
    _tsv(src / "videos.tsv", ["video_id", "split"], [["v1", "train"]])
    _tsv(src / "captions_en.tsv", ["video_id", "text", "start", "end", "kind"],
         [["v1", "cut", 0, 5, "caption"]])
    return src


def test_overwrite_replaces_only_a_dataset_folder(tmp_path, build, capsys, monkeypatch):
    """--overwrite never replaces the release itself, a folder holding it, or a folder that
    is not a dataset; a built dataset it does replace."""
    src = _small_release(tmp_path / "data" / "raw")
    (src / "NOTES.txt").write_text("my notes")
    before = sorted(p.name for p in src.iterdir())
    for out in (src, tmp_path / "data"):
        assert build("rudder", src, "--overwrite", out=out)[0] == 2
        assert "the build would replace its own input" in capsys.readouterr().err
    monkeypatch.chdir(src)
    assert build("rudder", src, "--overwrite", out=".")[0] == 2
    assert "--out . is or contains --src" in capsys.readouterr().err
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    assert build("rudder", src, "--overwrite", out=other)[0] == 2
    assert "is not a rudder dataset folder (no rudder.json)" in capsys.readouterr().err
    assert (other / "keep.txt").is_file() and sorted(p.name for p in src.iterdir()) == before
    code, out = build("rudder", src)
    assert code == 0 and build("rudder", src, "--overwrite")[0] == 0


def test_unreadable_inputs_give_one_line_errors(tmp_path, build, capsys):
    src = _small_release(tmp_path / "src")
    (src / "captions_en.tsv").write_bytes(
        "\ufeffvideo_id\ttext\tstart\tend\tkind\nv1\tcut\t0\t5\tcaption\n".encode()
    )
    assert build("rudder", src)[0] == 0  # an Excel byte-order mark is accepted
    (src / "captions_en.tsv").write_bytes(
        "video_id\ttext\tstart\tend\tkind\nv1\tcafé\t0\t5\tcaption\n".encode("cp1252")
    )
    assert build("rudder", src, out=tmp_path / "a")[0] == 2
    assert (f"error: {src / 'captions_en.tsv'}: not UTF-8 text (byte 0xe9 at offset 35); "
            "re-save it as UTF-8") in capsys.readouterr().err
    _small_release(tmp_path / "src2")
    (tmp_path / "src2" / "features").mkdir()
    (tmp_path / "src2" / "features" / "audio.h5").write_bytes(b"not hdf5")
    assert build("rudder", tmp_path / "src2", out=tmp_path / "b")[0] == 2
    assert "audio.h5: cannot be read as HDF5" in capsys.readouterr().err
    (tmp_path / "a-file").write_text("x")
    assert build("rudder", _small_release(tmp_path / "src3"), out=tmp_path / "a-file" / "o")[0] == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 'a-file'}: ") and len(err.splitlines()) == 1


def test_bad_option_values_are_refused(tmp_path, build, capsys):
    src = _small_release(tmp_path / "src")
    with pytest.raises(SystemExit):
        build("rudder", src, "--machine-translated", "marathi")
    assert "invalid choice: 'marathi'" in capsys.readouterr().err
    from datasets_scripts.__main__ import main

    with pytest.raises(SystemExit):
        main(["translate", str(tmp_path), "--from", "mr", "--to", "ta", "--batch-size", "0"])
    assert "argument --batch-size: 0 is outside [1, 100000]" in capsys.readouterr().err
