"""After ``heuristics label`` rewrites a built folder's captions in place,
``datasets.load_dataset(folder, "captions")`` returns the new columns, not its old cache."""

import pytest

from heuristics.__main__ import main as heuristics_main
from rudder.data.layout import DatasetFolder

LEXICON = "concept_id\tpos\tlang\tlemma\nn:door\tnoun\ten\tdoor\nv:open\tverb\ten\topen\n"


def test_load_dataset_after_label(tmp_path, build, loads):
    pytest.importorskip("datasets")
    src = tmp_path / "src"
    src.mkdir()
    (src / "charades_sta_test.txt").write_text(
        "T1 0.0 4.0##person opens the door.\nT2 1.0 3.0##a door.\n"
    )
    code, out = build("charades_sta", src)
    assert code == 0
    assert "noun_classes" not in loads(out)["test"].column_names
    (tmp_path / "lexicon.tsv").write_text(LEXICON)
    args = ["label", "--dataset", str(out), "--tagger", "lexicon"]
    assert heuristics_main(args + ["--lexicon", str(tmp_path / "lexicon.tsv"), "--no-cache"]) == 0
    loaded = loads(out)["test"]  # the same HF cache directory as before
    on_disk = DatasetFolder(out).captions("test").to_pydict()
    assert loaded["noun_classes"] == on_disk["noun_classes"] == [["n:door"], ["n:door"]]
