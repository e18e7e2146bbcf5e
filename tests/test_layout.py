import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rudder.atomic import sweep
from rudder.data.card import Card
from rudder.data.layout import DatasetFolder, DatasetMeta, ExpertInfo, LayoutError, parse_expert
from rudder.data.layout_writer import DatasetWriter, replace_tables


def _meta():
    return DatasetMeta("t", "1", ["mr"], {"scene": ExpertInfo(4), "audio@mr": ExpertInfo(3, True)})


def _videos():
    return pa.table(
        {
            "video_id": ["a", "b", "c"],
            "duration": [1.0, 2.0, 3.0],
            "split": ["train", "validation", "test"],
            "experts": [["scene", "audio@mr"], ["scene"], ["scene", "audio@mr"]],
        }
    )


def _captions(lang="mr"):
    return pa.table(
        {
            "caption_id": ["1", "2", "3"],
            "video_id": ["a", "b", "c"],
            "lang": [lang] * 3,
            "text": ["x", "y", "z"],
            "start": [0.0] * 3,
            "end": [1.0] * 3,
            "kind": ["caption"] * 3,
            "machine_translated": [False] * 3,
        }
    )


def _write(path, scene_values=tuple(range(12))):
    with DatasetWriter(path, _meta(), Card("T", "desc")) as writer:
        writer.write_videos(_videos())
        writer.write_captions(_captions())
        writer.write_expert("scene", [(["a", "b", "c"], np.reshape(scene_values, (3, 4)))])
        writer.write_expert("audio@mr", [(["a", "c"], [np.ones((2, 3)), np.zeros((5, 3))])])


def test_round_trip_and_load_dataset(tmp_path):
    _write(tmp_path / "ds")
    folder = DatasetFolder(tmp_path / "ds")
    assert folder.experts == ["audio@mr", "scene"]
    audio = folder.features("audio@mr", "test").to_pylist()
    assert audio[0]["video_id"] == "c" and np.asarray(audio[0]["feature"]).shape == (5, 3)
    assert folder.features("audio@mr", "validation") is None  # empty split
    scene = folder.features("scene", "validation").column("feature").to_pylist()
    assert scene == [[4.0, 5.0, 6.0, 7.0]]
    datasets = pytest.importorskip("datasets")
    loaded = datasets.load_dataset(str(tmp_path / "ds"), "features.audio@mr")
    assert set(loaded) == {"train", "test"}
    captions = datasets.load_dataset(str(tmp_path / "ds"), "captions")
    assert captions["validation"][0]["video_id"] == "b"


def test_failed_build_leaves_nothing(tmp_path):
    features = np.ones((3, 4))
    features[1, 2] = np.nan
    with (
        pytest.raises(LayoutError, match="video 'b' has NaN"),
        DatasetWriter(tmp_path / "ds", _meta(), Card("T", "d")) as writer,
    ):
        writer.write_videos(_videos())
        writer.write_expert("scene", [(["a", "b", "c"], features)])
    assert list(tmp_path.iterdir()) == []


def test_bad_inputs_are_named(tmp_path):
    with DatasetWriter(tmp_path / "ds", _meta(), Card("T", "d")) as writer:
        with pytest.raises(LayoutError, match="before"):
            writer.write_captions(_captions())
        writer.write_videos(_videos())
        with pytest.raises(ValueError, match="unsupported language 'fr'.*supported codes: mr, hi"):
            writer.write_captions(_captions("fr"))
        with pytest.raises(LayoutError, match=r"video 'a' has shape \(5,\)"):
            writer.write_expert("scene", [(["a"], np.ones((1, 5)))])
        with pytest.raises(LayoutError, match="unknown video_id 'zz'"):
            writer.write_expert("scene", [(["zz"], np.ones((1, 4)))])
        writer.write_captions(_captions())
        writer.write_expert("scene", [(["a", "b", "c"], np.ones((3, 4)))])
        writer.write_expert("audio@mr", [(["a"], [np.ones((1, 3))])])
    with pytest.raises(LayoutError, match="already exists"):
        DatasetWriter(tmp_path / "ds", _meta(), Card("T", "d"))
    with pytest.raises(LayoutError, match="'<kind>@<lang>'"):
        parse_expert("Audio-MR")


@pytest.mark.parametrize("expert", [{"dim": "256"}, {"dim": 0}, {"dim": 4, "variable_length": 1}])
def test_a_bad_expert_entry_in_rudder_json_is_named(tmp_path, expert):
    _write(tmp_path / "ds")
    meta = tmp_path / "ds" / "rudder.json"
    data = json.loads(meta.read_text())
    data["experts"]["scene"] = expert
    meta.write_text(json.dumps(data))
    with pytest.raises(LayoutError, match=r"rudder.json: not a valid rudder.json .*experts.scene "
                       r"needs an integer dim >= 1"):
        DatasetFolder(tmp_path / "ds")


def test_a_bad_text_features_dim_and_a_damaged_relations_file_are_named(tmp_path):
    _write(tmp_path / "ds")
    meta = tmp_path / "ds" / "rudder.json"
    data = json.loads(meta.read_text())
    meta.write_text(json.dumps({**data, "text_features_dim": "7"}))
    with pytest.raises(LayoutError, match="text_features_dim must be an integer >= 1, got '7'"):
        DatasetFolder(tmp_path / "ds")
    meta.write_text(json.dumps(data))
    (tmp_path / "ds" / "relations").mkdir()
    (tmp_path / "ds" / "relations" / "all.parquet").write_bytes(b"PAR1 not a table")
    with pytest.raises(LayoutError, match=r"relations/all.parquet: cannot read the table"):
        DatasetFolder(tmp_path / "ds").relations()


def test_replace_tables_all_or_nothing(tmp_path):
    _write(tmp_path / "ds")
    folder = DatasetFolder(tmp_path / "ds")
    new = folder.captions("train").append_column("nouns", pa.array([["bottle"]]))
    with pytest.raises(AttributeError):  # the second table is not a table: nothing is replaced
        replace_tables(tmp_path / "ds", "captions", {"train": new, "test": "not a table"})
    assert "nouns" not in DatasetFolder(tmp_path / "ds").captions("train").column_names
    replace_tables(tmp_path / "ds", "captions", {"train": new})
    assert DatasetFolder(tmp_path / "ds").captions("train").column("nouns").to_pylist() == [
        ["bottle"]]


def test_ensure_config_adds_relations_to_the_card(tmp_path):
    from rudder.data.card import ensure_config

    _write(tmp_path / "ds")
    relations = pa.table({"caption_id_a": ["1"], "caption_id_b": ["2"], "label": [1],
                          "annotator": ["a"]})
    replace_tables(tmp_path / "ds", "relations", {"all": relations})
    files = [{"split": "train", "path": "relations/all.parquet"}]
    ensure_config(tmp_path / "ds", "relations", files)
    ensure_config(tmp_path / "ds", "relations", files)  # idempotent
    card = (tmp_path / "ds" / "README.md").read_text()
    assert card.count("config_name: relations") == 1 and card.rstrip().endswith("other")
    datasets = pytest.importorskip("datasets")
    loaded = datasets.load_dataset(str(tmp_path / "ds"), "relations",
                                   cache_dir=str(tmp_path / "cache"))
    assert loaded["train"][0]["label"] == 1


def test_content_digests_see_new_values_of_the_same_size(tmp_path):
    """The app's index cache is keyed by the content digests: features rewritten with other
    values (same shapes, so the same file sizes) change them, not the fingerprint."""
    _write(tmp_path / "ds")
    before = DatasetFolder(tmp_path / "ds").content_digests()
    _write(tmp_path / "same")
    assert DatasetFolder(tmp_path / "same").content_digests() == before
    _write(tmp_path / "other", scene_values=tuple(range(12))[::-1])

    def sizes(name):
        return {p.relative_to(tmp_path / name): p.stat().st_size
                for p in (tmp_path / name).rglob("*.parquet")}

    assert sizes("other") == sizes("ds")  # the change does not show in the file sizes
    other = DatasetFolder(tmp_path / "other")
    assert other.content_digests() != before
    assert other.fingerprint() == DatasetFolder(tmp_path / "ds").fingerprint()


def test_load_dataset_sees_a_rewrite_in_place(tmp_path):
    """datasets 5 keys a local folder's cache by the card, not by the files' mtimes: every
    rewrite must change the card (its data digests), or the old cache is returned."""
    datasets = pytest.importorskip("datasets")
    _write(tmp_path / "ds")
    cache = str(tmp_path / "cache")
    before = datasets.load_dataset(str(tmp_path / "ds"), "captions", cache_dir=cache)
    assert "nouns" not in before["train"].column_names
    folder = DatasetFolder(tmp_path / "ds")
    labelled = folder.captions("train").append_column("nouns", pa.array([["bottle"]]))
    replace_tables(tmp_path / "ds", "captions", {"train": labelled})
    after = datasets.load_dataset(str(tmp_path / "ds"), "captions", cache_dir=cache)
    assert after["train"]["nouns"] == [["bottle"]]
    # Same schema and size, another value: still seen.
    renamed = labelled.set_column(3, "text", pa.array(["w"]))
    replace_tables(tmp_path / "ds", "captions", {"train": renamed})
    again = datasets.load_dataset(str(tmp_path / "ds"), "captions", cache_dir=cache)
    assert again["train"]["text"] == ["w"]
    assert again["test"]["text"] == ["z"]


def _dead_pid() -> int:
    code = "import os; print(os.getpid())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    return int(done.stdout)


KILLABLE = """
import sys, time
sys.path.insert(0, {tests!r})
import numpy as np
from test_layout import _meta, _videos, _captions, Card, DatasetWriter
from rudder.data import layout_writer
from rudder.data.layout import DatasetFolder
mode, target = sys.argv[1], sys.argv[2]
if mode == "build":
    with DatasetWriter(target, _meta(), Card("T", "d"), overwrite=True) as writer:
        writer.write_videos(_videos())
        print("staged", flush=True)
        time.sleep(60)
else:
    write = layout_writer.pq.write_table
    def slow_write(table, path):
        write(table, path)
        print("staged", flush=True)
        time.sleep(60)
    layout_writer.pq.write_table = slow_write
    layout_writer.replace_tables(target, "captions",
                                 {{"train": DatasetFolder(target).captions("test")}})
"""


def _kill_midway(tmp_path, mode, sig):
    script = tmp_path / "killable.py"
    script.write_text(KILLABLE.format(tests=str(Path(__file__).parent)))
    process = subprocess.Popen(
        [sys.executable, str(script), mode, str(tmp_path / "ds")], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline().strip() == "staged"
    process.send_signal(sig)
    return process.wait(timeout=30)


def _hidden(folder):
    """Hidden files and folders, but the dataset lock file (kept on purpose)."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob(".*")
                  if p.name != ".rudder.lock")


@pytest.mark.parametrize("mode", ["build", "replace"])
def test_sigterm_midway_leaves_the_dataset_and_no_staging(tmp_path, mode):
    _write(tmp_path / "ds")
    card = (tmp_path / "ds" / "README.md").read_text()
    assert _kill_midway(tmp_path, mode, signal.SIGTERM) == 128 + signal.SIGTERM
    assert _hidden(tmp_path) == []
    assert (tmp_path / "ds" / "README.md").read_text() == card
    assert DatasetFolder(tmp_path / "ds").captions("train")["text"].to_pylist() == ["x"]


@pytest.mark.parametrize("mode", ["build", "replace"])
def test_sigkill_staging_is_swept_by_the_next_writer(tmp_path, mode):
    _write(tmp_path / "ds")
    assert _kill_midway(tmp_path, mode, signal.SIGKILL) == -signal.SIGKILL
    assert len(_hidden(tmp_path)) == 1  # nothing could run: the staging is still there
    if mode == "build":  # the next writer sweeps before anything else, even a refusal
        with pytest.raises(LayoutError, match="already exists"):
            DatasetWriter(tmp_path / "ds", _meta(), Card("T", "d"))
    else:
        replace_tables(tmp_path / "ds", "captions", {"train": _captions().slice(0, 1)})
    assert _hidden(tmp_path) == []
    assert DatasetFolder(tmp_path / "ds").captions("train")["text"].to_pylist() == ["x"]


def test_sweep_restores_a_target_a_killed_swap_moved_aside(tmp_path):
    _write(tmp_path / "ds")
    aside = tmp_path / f".ds.old-{_dead_pid()}-0123abcd"
    (tmp_path / "ds").rename(aside)
    staged = tmp_path / f".ds.staging-{_dead_pid()}-4567cdef"
    staged.mkdir()
    running = tmp_path / f".ds.staging-{os.getpid()}-89abcdef"
    running.mkdir()
    notes = sweep(tmp_path / "ds")
    assert [n.split(",")[0] for n in notes] == [
        f"restored {tmp_path / 'ds'} from {aside.name}",
        f"removed {staged.name}",
    ]
    assert _hidden(tmp_path) == [running.name]  # a running writer's staging is left alone
    assert DatasetFolder(tmp_path / "ds").captions("test")["text"].to_pylist() == ["z"]
