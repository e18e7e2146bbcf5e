"""The subject-noun stop-list: reading, applying, and its effect on label's statistics."""

import pytest

from heuristics.__main__ import main
from heuristics.classes import lexicon_entries, read_lexicon
from heuristics.label import LabelConfig, format_statistics, label_dataset
from heuristics.lexicon_tagger import LexiconTagger
from heuristics.stop_nouns import StopNounError, counted_nouns, default_stop_nouns, read_stop_nouns
from rudder.data.layout import DatasetFolder

from .conftest import LEXICON, build_dataset

CAPTIONS = [
    ("c1", "v1", "en", "person cut the paper"),
    ("c2", "v2", "en", "person fold the card"),
    ("c3", "v3", "en", "person take a bottle"),
]


def test_counted_nouns_by_head_and_language():
    stop = default_stop_nouns()
    assert counted_nouns(["person", "door", "person:young", "man"], "en", stop) == ["door"]
    assert counted_nouns(["व्यक्ति", "दरवाज़ा"], "hi", stop) == ["दरवाज़ा"]
    assert counted_nouns(["person"], "en", {}) == ["person"]
    assert set(stop) == {"en", "hi", "mr", "ta", "te"}


def test_read_stop_nouns(tmp_path):
    path = tmp_path / "stop.tsv"
    path.write_text("lang\tlemma\nen\tChef\nhi\tरसोइया\n\n", encoding="utf-8")
    assert read_stop_nouns(path) == {"en": {"chef"}, "hi": {"रसोइया"}}
    path.write_text("lang\tlemma\nfr\tchef\n", encoding="utf-8")
    with pytest.raises(StopNounError, match=r"stop.tsv:2:.*fr"):
        read_stop_nouns(path)
    path.write_text("language,lemma\n", encoding="utf-8")
    with pytest.raises(StopNounError, match="header"):
        read_stop_nouns(path)


@pytest.fixture
def person_dataset(tmp_path):
    lexicon = tmp_path / "lexicon.tsv"
    lexicon.write_text(LEXICON + "n:person\tnoun\ten\tperson\n", encoding="utf-8")
    return build_dataset(tmp_path / "ds", CAPTIONS), lexicon


def test_subject_does_not_make_captions_partial(person_dataset):
    root, lexicon = person_dataset
    classes = read_lexicon(lexicon)
    tagger = LexiconTagger(lexicon_entries(classes))
    stats = label_dataset(root, tagger, classes, LabelConfig(), dry_run=True)
    # c1..c3 share only "person": with the stop-list they are negatives of each other
    assert stats["train"]["partial"]["mean"] == 0.0
    assert stats["train"]["captions_with_stop_nouns"] == 3
    assert "stop-listed subject noun" in format_statistics(stats)
    stats = label_dataset(root, tagger, classes, LabelConfig(stop_nouns={}), dry_run=True)
    assert stats["train"]["partial"]["mean"] == 2.0  # the old behaviour: all partial
    label_dataset(root, tagger, classes, LabelConfig())
    train = DatasetFolder(root).captions("train").to_pydict()
    assert train["nouns"][0] == ["person", "paper"] and train["noun_classes"][0] == ["n:paper"]


def test_label_cli_stop_noun_flags(person_dataset, tmp_path, capsys):
    root, lexicon = person_dataset
    argv = ["label", "--dataset", str(root), "--tagger", "lexicon", "--lexicon", str(lexicon)]
    assert main(argv + ["--dry-run", "--no-stop-nouns"]) == 0
    assert "'train': 0" in capsys.readouterr().out
    bad = tmp_path / "bad.tsv"
    bad.write_text("nope\n", encoding="utf-8")
    assert main(argv + ["--dry-run", "--stop-nouns", str(bad)]) == 2
    assert "bad.tsv:1" in capsys.readouterr().err
