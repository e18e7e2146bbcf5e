"""``supervision.relations_file``: a run's own relations table instead of the dataset's."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rudder.config import ConfigError, check_new_run, from_dict
from rudder.runs.layout import checkpoints_under
from rudder.training.batch_supervision import read_relations_file


def test_the_file_needs_manual_relations():
    config = from_dict({"supervision": {"relations_file": "relations.parquet"}})
    with pytest.raises(ConfigError, match="needs supervision.manual_relations"):
        check_new_run(config)
    check_new_run(from_dict({"supervision": {"relations_file": "r.parquet",
                                             "manual_relations": True}}))


def test_a_relative_path_is_read_from_the_run_folder(tmp_path):
    table = pa.table({"caption_id_a": ["a"], "caption_id_b": ["b"],
                      "label": pa.array([1], pa.int8())})
    pq.write_table(table, tmp_path / "relations.parquet")
    assert read_relations_file("relations.parquet", tmp_path).equals(table)
    assert read_relations_file(tmp_path / "relations.parquet").equals(table)


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file"),
    (b"not parquet", "not a parquet table"),
    (pa.table({"caption_id_a": ["a"], "label": [1]}), r"missing column\(s\) \['caption_id_b'\]"),
    (pa.table({"caption_id_a": ["a"], "caption_id_b": ["b"], "label": [7]}), "labels must be 0-3"),
])
def test_a_bad_file_is_named(tmp_path, content, message):
    path = tmp_path / "r.parquet"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        pq.write_table(content, path)
    with pytest.raises(ConfigError, match=f"supervision.relations_file {path}: {message}"):
        read_relations_file(path)


def test_runs_in_staging_folders_are_no_runs(tmp_path):
    for folder in ("done", ".done.staging-1-abcdef01/run", "group/seed-0"):
        (tmp_path / folder / "checkpoints").mkdir(parents=True)
        (tmp_path / folder / "checkpoints" / "best.pt").write_bytes(b"")
    found = {p.parent.parent.relative_to(tmp_path).as_posix() for p in checkpoints_under(tmp_path)}
    assert found == {"done", "group/seed-0"}
    hidden_root = tmp_path / ".done.staging-1-abcdef01" / "run"
    assert checkpoints_under(hidden_root) == [hidden_root / "checkpoints" / "best.pt"]
