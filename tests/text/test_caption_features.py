"""rudder.text.caption_features: Collaborative Experts' text-feature pickles, read safely."""

import os
import pickle

import numpy as np
import pytest

from rudder.data.loader import caption_ordinals
from rudder.text.caption_features import CaptionFeatureError, CaptionFeatureFile
from rudder.text.pretrained import load_text_encoder


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
