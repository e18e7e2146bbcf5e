"""A writer killed (``os._exit``, as SIGKILL: nothing runs after it) before or after any one
of its renames leaves no mixed dataset: once the folder is opened again it is wholly as
before or wholly as after, for ``label``, ``translate``, ``import-relations`` and
``video-relations``. Each writer runs in a forked child, so no test re-imports."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest
import yaml

from datasets_scripts.__main__ import main as datasets_main
from heuristics.__main__ import main as heuristics_main
from rudder.data.card import card_digests, data_digest
from rudder.data.layout import SPLITS, DatasetFolder, LayoutError
from rudder.data.update_journal import JOURNAL

from .conftest import LEXICON, build_dataset

SETS = "video_id,objects,actions\nv1,paper,cut\nv2,paper,fold\nv4,card,\nv5,card,\n"
MANUAL = "caption_id_a,caption_id_b,label,annotator\nc1,c3,partial,ann\nc5,c6,positive,ann\n"


def _run_in_child(action, kill_at: int | None, count_file) -> int:
    """Run ``action`` in a forked child that dies (``os._exit(137)``) right before its
    ``kill_at``-th ``os.replace`` (0-based: 0 dies before the first; None never); the child
    writes how many renames it made to ``count_file`` when it finishes."""
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            real, done = os.replace, [0]

            def replace(*args, **kwargs):
                if done[0] == kill_at:
                    os._exit(137)
                real(*args, **kwargs)
                done[0] += 1

            os.replace = replace
            sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 -- the child exits
            code = action()
            count_file.write_text(str(done[0]))
        finally:
            os._exit(code if isinstance(code, int) else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _state(root):
    """What a reader sees: every caption split, the relations, rudder.json and the card's
    configs (their file lists); the card's digests are checked against the files."""
    folder = DatasetFolder(root)  # completes an update a killed writer committed
    folder.check_splits_agree()
    assert not (root / JOURNAL).exists()
    front = yaml.safe_load((root / "README.md").read_text(encoding="utf-8").split("---\n")[1])
    for name, description in card_digests(root).items():
        config = next(c for c in front["configs"] if c["config_name"] == name)
        paths = [f["path"] for f in config["data_files"]]
        assert description == data_digest(root, paths), f"stale digest of {name}"
    relations = folder.relations()
    return {
        "captions": {s: folder.captions(s).to_pylist() for s in SPLITS
                     if (root / "captions" / f"{s}.parquet").is_file()},
        "relations": relations.to_pylist() if relations is not None else None,
        "meta": json.loads((root / "rudder.json").read_text(encoding="utf-8")),
        "configs": {c["config_name"]: c["data_files"] for c in front["configs"]},
    }


def _tiny(root):
    build_dataset(root / "src-ds")
    return root / "src-ds"


def _built_for_translation(root):
    src = root / "tsrc"
    src.mkdir()
    (src / "videos.tsv").write_text("video_id\tsplit\nv1\ttrain\nv2\tvalidation\nv3\ttest\n")
    (src / "captions_mr.tsv").write_text(
        "video_id\ttext\tstart\tend\tkind\nv1\tबाटली कापा\t0\t5\tcaption\n"
        "v2\tकागद दुमडा\t5\t9\tcaption\nv3\tरंग द्या\t0\t3\tcaption\n"
    )
    assert datasets_main(["build", "rudder", "--src", str(src), "--out", str(root / "tds")]) == 0
    return root / "tds"


def _label(root, tmp):
    (tmp / "lexicon.tsv").write_text(LEXICON, encoding="utf-8")
    return lambda: heuristics_main(["label", "--dataset", str(root), "--tagger", "lexicon",
                                    "--lexicon", str(tmp / "lexicon.tsv"), "--no-cache"])


def _translate(root, tmp):
    from datasets_scripts.translate import translate_dataset

    from ..datasets_scripts.test_translate_captions import FakeBackend

    def run():
        cache = tmp / f"cache-{os.getpid()}.sqlite"
        translate_dataset(root, "mr", ["ta", "te"], backend=FakeBackend(), cache_path=cache,
                          texts_per_second=0)
        return 0

    return run


def _import_relations(root, tmp):
    (tmp / "manual.csv").write_text(MANUAL, encoding="utf-8")
    return lambda: heuristics_main(["import-relations", "--dataset", str(root),
                                    str(tmp / "manual.csv")])


def _video_relations(root, tmp):
    (tmp / "sets.csv").write_text(SETS, encoding="utf-8")
    return lambda: heuristics_main(["video-relations", "--dataset", str(root),
                                    "--sets", str(tmp / "sets.csv")])


@pytest.mark.parametrize("command, dataset", [
    pytest.param(_label, _tiny, marks=pytest.mark.slow),  # ~11 s
    (_translate, _built_for_translation),
    (_import_relations, _tiny),
    pytest.param(_video_relations, _tiny, marks=pytest.mark.slow),  # ~8 s
], ids=["label", "translate", "import-relations", "video-relations"])
def test_a_kill_at_any_rename_leaves_old_or_new_never_a_mix(tmp_path, command, dataset):
    pristine = dataset(tmp_path)
    count = tmp_path / "renames"

    def fresh(name):
        copy = tmp_path / name
        shutil.copytree(pristine, copy)
        return copy

    whole = fresh("whole")
    assert _run_in_child(command(whole, tmp_path), None, count) == 0
    renames = int(count.read_text())
    before, after = _state(fresh("untouched")), _state(whole)
    assert before != after and renames >= 3  # the commit, the files, the card
    outcomes = []
    for kill_at in range(renames):
        root = fresh(f"killed-{kill_at}")
        assert _run_in_child(command(root, tmp_path), kill_at, count) == 137
        seen = _state(root)
        assert seen in (before, after), f"a mixed dataset after a kill before rename {kill_at}"
        outcomes.append("new" if seen == after else "old")
        stale = [p.name for p in root.glob(".rudder.update-*")]
        assert stale == [], f"staging left after a kill before rename {kill_at}: {stale}"
    # Killed before the commit (the journal's rename): old; after it: new, once reopened.
    assert outcomes == ["old"] * outcomes.count("old") + ["new"] * outcomes.count("new")
    assert outcomes[0] == "old" and outcomes[-1] == "new"


def test_the_captions_config_loads_after_a_completed_kill(tmp_path):
    """``datasets.load_dataset(folder, "captions")`` serves the labelled captions of a label
    run killed right after its commit, once rudder has opened the folder."""
    datasets = pytest.importorskip("datasets")
    root = _tiny(tmp_path)
    count = tmp_path / "renames"
    assert _run_in_child(_label(root, tmp_path), 2, count) == 137  # commit + first split
    assert (root / JOURNAL).exists()
    DatasetFolder(root)
    loaded = datasets.load_dataset(str(root), "captions", cache_dir=str(tmp_path / "hf"))
    for split in ("train", "test"):
        on_disk = DatasetFolder(root).captions(split).to_pydict()
        assert loaded[split]["noun_classes"] == on_disk["noun_classes"]
        assert any(on_disk["noun_classes"])


def test_a_mixed_folder_is_refused_by_readers_naming_the_fix(tmp_path):
    """A folder whose splits disagree (labelled train, unlabelled test, as an interrupted
    label of an older rudder left) is refused by training's reader."""
    import pyarrow.parquet as pq

    from rudder.data.loader import load_split

    root = _tiny(tmp_path)
    assert _label(root, tmp_path)() == 0
    unlabelled = build_dataset(tmp_path / "plain")
    shutil.copy(unlabelled / "captions" / "test.parquet", root / "captions" / "test.parquet")
    assert "noun_classes" in pq.read_schema(root / "captions" / "train.parquet").names
    with pytest.raises(LayoutError, match=r"caption splits disagree .* heuristics label .* "
                                          r"--overwrite"):
        load_split(DatasetFolder(root), "test", ["scene"], None, ["en"])
