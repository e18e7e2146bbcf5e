"""rudder.data.epic_relevance: the EPIC relevance benchmark built from the real
EPIC-KITCHENS-100 sentence and class files in ../shared/data/epic100."""

import json
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from rudder.data import epic_relevance
from rudder.data.layout import DatasetFolder, LayoutError
from rudder.data.loader import build_class_index
from rudder.supervision import relevance


@pytest.fixture(scope="module")
def epic(shared_data, tmp_path_factory):
    return epic_relevance.build_epic_relevance(shared_data / "epic100",
                                               tmp_path_factory.mktemp("epic") / "bench")


def _classes(folder, split):
    table = folder.captions(split).to_pydict()
    index = build_class_index(folder)
    return table, index.multi_hot(table["noun_classes"]), index.multi_hot(table["verb_classes"])


def test_clips_splits_and_classes_come_from_the_real_files(epic, shared_data):
    folder = DatasetFolder(epic)
    counts = {split: folder.captions(split).num_rows for split in ("train", "validation", "test")}
    assert counts == {"train": 600, "validation": 200, "test": 200}
    table = folder.captions("train").to_pydict()
    sentences = {s["narration_id"]: s
                 for s in epic_relevance.read_sentences(shared_data / "epic100")}
    for clip, text, nouns, verbs in zip(table["video_id"], table["text"], table["noun_classes"],
                                        table["verb_classes"], strict=True):
        source = sentences[clip]  # a real narration, with its gold classes
        assert text == source["text"] and verbs == [f"v:{source['verb_class']}"]
        assert nouns == [f"n:{key}" for key in source["noun_classes"]]
    assert set(table["lang"]) == {"en"} and len(set(table["video_id"])) == 600
    meta = json.loads((epic / "rudder.json").read_text())
    assert meta["simulated"] and meta["extra"]["generator_version"] == epic_relevance.EPIC_VERSION
    assert set(meta["extra"]["source_sha256"]) == set(epic_relevance.SOURCE_FILES)
    card = (epic / "README.md").read_text()
    assert "SIMULATED" in card and meta["extra"]["source_sha256"][
        epic_relevance.SENTENCES][:16] in card


def test_the_relevance_structure_is_epics(epic):
    # Own clip R = 1 for every caption (one narration per clip, each with a verb and a noun);
    # a few percent of pairs of different clips reach R >= 0.4 (8.4% over all 15,989).
    _, nouns, verbs = _classes(DatasetFolder(epic), "train")
    r = relevance(nouns, verbs, nouns, verbs)
    assert torch.all(r.diagonal() == 1)
    off = r[~torch.eye(len(r), dtype=torch.bool)]
    assert 0.05 < float((off >= 0.4).float().mean()) < 0.12
    assert float((off >= 0.75).float().mean()) < 0.01


def test_features_carry_the_classes_and_the_build_is_deterministic(epic, shared_data, tmp_path):
    folder = DatasetFolder(epic)
    again = epic_relevance.build_epic_relevance(shared_data / "epic100", tmp_path / "again")
    assert DatasetFolder(again).fingerprint() == folder.fingerprint()
    table, _, verbs = _classes(folder, "train")
    action = pq.read_table(epic / "features" / "action" / "train.parquet").to_pydict()
    vectors = np.array(action[next(k for k in action if k != "video_id")], dtype=np.float64)
    verb_of = dict(zip(table["video_id"], verbs.argmax(1).tolist(), strict=True))
    same = np.array([[verb_of[a] == verb_of[b] for b in action["video_id"]]
                     for a in action["video_id"]])
    sims = np.corrcoef(vectors)
    off = ~np.eye(len(sims), dtype=bool)
    # clips sharing a verb class have correlated action features; others do not
    assert sims[same & off].mean() > sims[~same].mean() + 0.1


def test_missing_or_malformed_source_files_are_clear_errors(shared_data, tmp_path):
    with pytest.raises(LayoutError, match="missing EPIC-KITCHENS-100 file"):
        epic_relevance.read_sentences(tmp_path)
    for name in epic_relevance.SOURCE_FILES:
        shutil.copy(shared_data / "epic100" / name, tmp_path / name)
    path = tmp_path / epic_relevance.SENTENCES
    lines = path.read_text().splitlines()
    lines[3] = "P01_01_x,open door,3,[not a list,open,['door']"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LayoutError, match=r"EPIC_100_retrieval_train_sentence.csv, line 4"):
        epic_relevance.read_sentences(tmp_path)
