import pickle

import numpy as np
import pytest

from datasets_scripts.build_report import BuildError, Reporter
from datasets_scripts.features import (
    FeatureSource,
    discover,
    feature_batches,
    read_expert_map,
    read_npy,
    scan_source,
)
from rudder.data.layout import DatasetFolder

h5py = pytest.importorskip("h5py")


def _pickle(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        pickle.dump(data, handle)
    return path


def test_scan_classifies_missing_and_bad(tmp_path):
    data = {
        "ok1": np.ones(4),
        "ok2": [1.0, 2.0, 3.0, 4.0],
        "none": None,
        "nan": float("nan"),
        "allnan": np.full(4, np.nan),
        "empty": np.zeros((0, 4)),
        "zeros": np.zeros(4),
        "somenan": np.array([1.0, np.nan, 1.0, 1.0]),
        "short": np.ones(3),
        "text": "abc",
        "notwanted": np.ones(4),
    }
    source = FeatureSource("scene", "pickle", [_pickle(tmp_path / "f.pickle", data)])
    wanted = set(data) - {"notwanted"}
    reporter = Reporter()
    scan = scan_source(source, wanted, reporter)
    assert (scan.dim, scan.variable_length) == (4, False)
    assert scan.video_ids == {"ok1", "ok2"}
    assert scan.missing == 5  # none, nan, allnan, empty, zeros
    assert dict(reporter.counts) == {
        "feature has NaN or inf": 1,
        "wrong feature dimension": 1,
        "unreadable feature": 1,
    }
    assert (
        "key 'short': wrong feature dimension: 'ndim 1, dim 3' (expert 'scene' has (4,))"
        in reporter.summary()
    )
    kept = scan_source(source, wanted, Reporter(), keep_zeros=True)
    assert kept.video_ids == {"ok1", "ok2", "zeros"}
    with pytest.raises(BuildError, match="key 'text': unreadable feature: .*not a numeric array"):
        scan_source(source, wanted, Reporter(strict=True))


def test_three_formats_give_the_same_batches(tmp_path):
    rng = np.random.default_rng(1)
    arrays = {f"v{i}": rng.random((2 + i, 3)).astype(np.float32) for i in range(5)}
    (tmp_path / "npy" / "action").mkdir(parents=True)
    for vid, array in arrays.items():
        np.save(tmp_path / "npy" / "action" / f"{vid}.npy", array)
    with h5py.File(tmp_path / "action.h5", "w") as handle:
        for vid, array in arrays.items():
            handle[vid] = array
    sources = [
        FeatureSource("action", "npy", [tmp_path / "npy" / "action"]),
        FeatureSource("action", "hdf5", [tmp_path / "action.h5"]),
        FeatureSource("action", "pickle", [_pickle(tmp_path / "a.pkl", arrays)]),
    ]
    for source in sources:
        scan = scan_source(source, set(arrays), Reporter())
        assert (scan.dim, scan.variable_length) == (3, True)
        batches = list(feature_batches(source, scan, batch_size=2))
        assert [len(ids) for ids, _ in batches] == [2, 2, 1]
        got = {vid: feats for ids, batch in batches for vid, feats in zip(ids, batch, strict=True)}
        assert sorted(got) == sorted(arrays)
        for vid, array in arrays.items():
            np.testing.assert_array_equal(got[vid], array)


def test_fixed_size_batches_are_stacked(tmp_path):
    data = {f"v{i}": np.full(2, i, np.float32) for i in range(1, 4)}
    source = FeatureSource("scene", "pickle", [_pickle(tmp_path / "s.pickle", data)])
    scan = scan_source(source, set(data), Reporter())
    ((ids, batch),) = list(feature_batches(source, scan, batch_size=8))
    assert ids == ["v1", "v2", "v3"] and batch.shape == (3, 2) and batch[2, 0] == 3.0


def test_discover_names_experts(tmp_path):
    root = tmp_path / "feats"
    _pickle(root / "aggregated_scene_25fps" / "densenet161-avg.pickle", {})
    _pickle(root / "aggregated_i3d_25fps" / "i3d-avg.pickle", {})
    _pickle(root / "aggregated_text" / "w2v-avg.pickle", {})  # no expert name: ignored
    _pickle(root / "custom" / "mystery.pkl", {})
    (root / "audio@hi").mkdir()
    np.save(root / "audio@hi" / "v1.npy", np.ones(2))
    reporter = Reporter()
    mapping = read_expert_map(["custom/*=object"], None)
    found = {
        s.expert: (s.kind, s.paths[0].relative_to(root).as_posix())
        for s in discover(root, mapping, reporter)
    }
    assert found == {
        "action": ("pickle", "aggregated_i3d_25fps/i3d-avg.pickle"),
        "audio@hi": ("npy", "audio@hi"),
        "object": ("pickle", "custom/mystery.pkl"),
        "scene": ("pickle", "aggregated_scene_25fps/densenet161-avg.pickle"),
    }
    assert any("w2v-avg.pickle" in note and "--expert-map" in note for note in reporter.notes)
    with pytest.raises(BuildError, match="both map to expert 'scene'"):
        discover(root, read_expert_map(["*i3d*=scene"], None), Reporter())


def test_expert_map_flags_and_file(tmp_path):
    path = tmp_path / "map.yaml"
    path.write_text("'*resnet*': object\n'*vggish*': audio@mr\n")
    assert read_expert_map(["a=scene"], path) == [
        ("a", "scene"),
        ("*resnet*", "object"),
        ("*vggish*", "audio@mr"),
    ]
    with pytest.raises(BuildError, match="use PATTERN=EXPERT"):
        read_expert_map(["scene"], None)
    with pytest.raises(BuildError, match="unsupported language 'fr'"):
        read_expert_map(["x=audio@fr"], None)


def test_charades_with_features(shared_data, tmp_path, build, loads):
    src = tmp_path / "src"
    src.mkdir()
    lines = (shared_data / "charades_sta" / "charades_sta_test.txt").read_text().splitlines()[:30]
    (src / "charades_sta_test.txt").write_text("\n".join(lines) + "\n")
    ids = sorted({line.split()[0] for line in lines})
    feats = {vid: np.full(5, i + 1.0) for i, vid in enumerate(ids[:-1])}  # the last video lacks it
    _pickle(tmp_path / "feats" / "aggregated_x" / "resnet152-avg.pickle", feats)
    code, out = build(
        "charades_sta", src, "--features", tmp_path / "feats", "--expert-map", "*resnet152*=object"
    )
    assert code == 0
    folder = DatasetFolder(out)
    experts = dict(
        zip(
            folder.videos("test")["video_id"].to_pylist(),
            folder.videos("test")["experts"].to_pylist(), strict=True,
        )
    )
    assert experts == {**{vid: ["object"] for vid in ids[:-1]}, ids[-1]: []}
    loaded = loads(out, "features.object")["test"]
    assert loaded.num_rows == len(ids) - 1
    assert loaded[0]["feature"] == [1.0] * 5 and loaded[0]["video_id"] == ids[0]


@pytest.mark.parametrize(
    "array",
    [
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        np.arange(3, dtype=">f4"),
    ],
)
def test_read_npy_matches_np_load(tmp_path, array):
    np.save(tmp_path / "a.npy", array)
    np.testing.assert_array_equal(read_npy(tmp_path / "a.npy"), np.load(tmp_path / "a.npy"))


def test_read_npy_refuses_bad_files(tmp_path):
    np.save(tmp_path / "o.npy", np.array([None, 1], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="object array"):
        read_npy(tmp_path / "o.npy")
    np.save(tmp_path / "t.npy", np.ones(4, np.float32))
    (tmp_path / "t.npy").write_bytes((tmp_path / "t.npy").read_bytes()[:-2])
    with pytest.raises(ValueError, match="smaller"):
        read_npy(tmp_path / "t.npy")
    source = FeatureSource("scene", "npy", [tmp_path])
    reporter = Reporter()
    assert scan_source(source, {"o", "t"}, reporter) is None  # nothing usable: a warning
    assert (
        reporter.counts["unreadable feature"] == 2
        and "no video of the dataset" in reporter.warnings[0]
    )


class _Payload:
    """Unpickling this would create the file ``marker`` (a code-execution payload)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        import pathlib

        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def test_feature_pickle_with_code_is_refused(tmp_path):
    marker = tmp_path / "ran"
    path = _pickle(tmp_path / "scene.pickle", {"v1": np.ones(4), "v2": _Payload(marker)})
    source = FeatureSource("scene", "pickle", [path])
    with pytest.raises(BuildError, match=r"scene\.pickle: refusing to unpickle pathlib"):
        scan_source(source, {"v1", "v2"}, Reporter())
    assert not marker.exists()


def test_rudder_release_pickle_with_code_is_refused(tmp_path, capsys):
    from datasets_scripts.__main__ import main

    marker = tmp_path / "ran"
    src = tmp_path / "src"
    _pickle(src / "rudder_train.pkl", [{"id": "v1", "2d": np.ones(3), "x": _Payload(marker)}])
    _pickle(src / "rudder_test.pkl", [{"id": "v2", "2d": np.ones(3)}])
    code = main(["build", "rudder", "--src", str(src), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "rudder_train.pkl: refusing to unpickle" in err
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_damaged_feature_pickle_is_named(tmp_path):
    path = _pickle(tmp_path / "scene.pickle", {"v1": np.ones(4)})
    path.write_bytes(path.read_bytes()[:20])
    source = FeatureSource("scene", "pickle", [path])
    with pytest.raises(BuildError, match=r"scene\.pickle: cannot be unpickled"):
        scan_source(source, {"v1"}, Reporter())
