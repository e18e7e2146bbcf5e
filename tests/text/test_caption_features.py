"""rudder.text.caption_features: Collaborative Experts' text-feature pickles, read safely."""

import io
import os
import pickle
import struct
from typing import ClassVar

import numpy as np
import pytest

from rudder.data.layout import DatasetFolder, ExpertInfo, LayoutError
from rudder.data.loader import build_vocabulary, caption_ordinals, load_split
from rudder.text.caption_features import CaptionFeatureError, CaptionFeatureFile
from rudder.text.encoders import load_text_encoder

from ..factories import caption, write_dataset


def write_pickle(path, table):
    path.write_bytes(pickle.dumps(table))
    return path


def test_features_follow_video_and_caption_order(tmp_path):
    a0, a1, b0 = np.ones((2, 3)), 2 * np.ones((4, 3)), 3 * np.ones((1, 3))
    path = write_pickle(tmp_path / "w2v_test.pickle", {"va": [a0, a1], "vb": [b0]})
    encoder = load_text_encoder(str(path))
    assert isinstance(encoder, CaptionFeatureFile) and encoder.dim == 3
    features, mask = encoder(["x", "y", "z"], video_ids=["vb", "va", "va"], ordinals=[0, 1, 0])
    assert features.shape == (3, 4, 3)
    assert mask.sum(1).tolist() == [1, 4, 2]
    assert features[0, 0, 0] == 3 and features[1, 3, 0] == 2 and features[2, 1, 0] == 1
    assert not features[0, 1:].any()


def test_caption_ordinals_count_within_each_video():
    assert caption_ordinals(["v2", "v1", "v2", "v1", "v2"]).tolist() == [0, 0, 1, 1, 2]


def test_missing_entries_and_free_text_are_clear_errors(tmp_path):
    encoder = CaptionFeatureFile(write_pickle(tmp_path / "f.pkl", {"va": [np.ones((2, 3))]}))
    with pytest.raises(CaptionFeatureError, match="no features for video 'vz'"):
        encoder(["t"], video_ids=["vz"], ordinals=[0])
    with pytest.raises(CaptionFeatureError, match="has 1 caption feature arrays but the dataset "
                       "has a caption number 2"):
        encoder(["t"], video_ids=["va"], ordinals=[1])
    with pytest.raises(CaptionFeatureError, match="cannot encode free text"):
        encoder(["a query"])


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_every_pickle_protocol_loads(tmp_path, protocol):
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    path = tmp_path / "f.pickle"
    path.write_bytes(pickle.dumps({"va": [array]}, protocol=protocol))
    assert np.array_equal(CaptionFeatureFile(path).array("va", 0), array)


def _english_and_marathi(tmp_path):
    """Two videos with English captions and Marathi translations before and between them."""
    rows = []
    for v in ("v0", "v1"):
        rows += [caption(f"{v}/mr/0", v, "mr", "कागद कापा", machine_translated=True),
                 caption(f"{v}/en/0", v, "en", "cut the paper"),
                 caption(f"{v}/mr/1", v, "mr", "कागद घडी करा", machine_translated=True),
                 caption(f"{v}/en/1", v, "en", "fold the paper")]
    features = {"scene": (ExpertInfo(2), ["v0", "v1"], np.eye(2, dtype=np.float32))}
    return DatasetFolder(write_dataset(tmp_path / "ds", {"v0": "train", "v1": "train"}, rows,
                                       features, languages=["en", "mr"]))


def test_pickle_entries_are_the_english_captions_in_release_order(tmp_path):
    folder = _english_and_marathi(tmp_path)
    # CE's pickle: entry k of a video is its k-th English caption; value 10 * video + k
    path = write_pickle(tmp_path / "w2v.pickle", {
        v: [np.full((2, 3), 10 * i + k, np.float32) for k in range(2)]
        for i, v in enumerate(("v0", "v1"))})
    encoder = CaptionFeatureFile(path)
    data = load_split(folder, "train", ["scene"], None, ["en"], text_encoder=encoder)
    videos, slots = data.caption_mask.nonzero(as_tuple=True)
    features, _ = data.token_features.gather(videos, slots)
    assert data.caption_texts[videos, slots].tolist() == ["cut the paper", "fold the paper"] * 2
    assert features[:, 0, 0].tolist() == [0, 1, 10, 11]
    with pytest.raises(LayoutError, match=r"w2v.pickle encodes the 'en' captions only.*\['mr'\]"
                       r".*set data.caption_langs: \[en\]"):
        load_split(folder, "train", ["scene"], build_vocabulary(folder, ["mr", "en"]),
                   ["mr", "en"], text_encoder=encoder)


def test_a_pickle_is_refused_where_entry_k_is_not_the_kth_caption(tmp_path):
    """MSR-VTT 1k-A's test captions are JSFusion's sentences, matched to their entries only
    at build time (--text-features); a pickle read at training time would take entry k."""
    import json

    folder = _english_and_marathi(tmp_path)
    meta = json.loads((folder.root / "rudder.json").read_text())
    meta["extra"] = {"source": "msrvtt", "split": "1k-A"}
    (folder.root / "rudder.json").write_text(json.dumps(meta))
    path = write_pickle(tmp_path / "w2v.pickle", {v: [np.ones((2, 3))] * 2 for v in ("v0", "v1")})
    with pytest.raises(LayoutError, match=r"MSR-VTT 1k-A's test captions are not entry k.*"
                       r"train with data.text_encoder=dataset"):
        load_split(DatasetFolder(folder.root), "train", ["scene"], None, ["en"],
                   text_encoder=CaptionFeatureFile(path))


class _Python2Pickler(pickle._Pickler):
    """Writes bytes as Python 2 wrote its ``str``: a BINSTRING of the raw bytes."""

    def save_bytes(self, obj):
        self.write(pickle.BINSTRING + struct.pack("<i", len(obj)) + obj)
        self.memoize(obj)

    dispatch: ClassVar[dict] = {**pickle._Pickler.dispatch, bytes: save_bytes}


def test_a_python2_pickle_loads(tmp_path):
    array = np.arange(6, dtype=np.float32).reshape(2, 3) + 0.5  # bytes that are not ASCII
    buffer = io.BytesIO()
    _Python2Pickler(buffer, protocol=2).dump({"va": [array]})
    path = tmp_path / "py2.pickle"
    path.write_bytes(buffer.getvalue())
    with pytest.raises(UnicodeDecodeError):
        pickle.loads(buffer.getvalue())  # what a plain Python 3 load does
    assert np.array_equal(CaptionFeatureFile(path).array("va", 0), array)


def test_max_words_cuts_the_pickle_tokens(tmp_path):
    path = write_pickle(tmp_path / "f.pkl", {"va": [np.ones((45, 3))]})
    assert load_text_encoder(str(path), max_words=12).array("va", 0).shape == (12, 3)
    assert load_text_encoder(str(path)).array("va", 0).shape == (45, 3)


class _Exploit:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_a_pickle_that_runs_code_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_pickle(tmp_path / "evil.pickle", {"va": [_Exploit()]})
    with pytest.raises(CaptionFeatureError,
                       match=r"evil.pickle: refusing to unpickle (posix|os|nt)\.system"):
        CaptionFeatureFile(path)
    assert not (tmp_path / "pwned").exists()
