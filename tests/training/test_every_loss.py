"""Every registered loss trains the model for an epoch on real batches without NaN."""

import json

import pytest

from rudder import losses


@pytest.mark.parametrize("name", losses.names())
def test_loss_trains_an_epoch(name, train_tiny, tmp_path):
    result = train_tiny(tmp_path / name, "--loss", name, "--epochs", "1")
    line = json.loads((tmp_path / name / "metrics.jsonl").read_text().splitlines()[0])
    assert line["train_loss"] == line["train_loss"]  # not NaN
    assert 0 <= result["test"]["t2v"]["R10"] <= 100


def test_partial_order_with_manual_relations(tiny_dataset, fast_args, tmp_path, capsys):
    import shutil

    import pyarrow as pa

    from rudder import train
    from rudder.data.layout_writer import replace_tables

    data = tmp_path / "data"
    shutil.copytree(tiny_dataset, data)
    args = ["--dataset", str(data), *fast_args, "--loss", "po",
            "--set", "supervision.manual_relations=true"]
    with pytest.raises(SystemExit):
        train.main([*args, "--output-dir", str(tmp_path / "no-relations")])
    assert "has no relations config" in capsys.readouterr().err
    # asymmetric, as the video heuristic writes them: v001 partial for v000, v000 positive back
    relations = pa.table({"caption_id_a": ["v000-en", "v001-en"],
                          "caption_id_b": ["v001-en", "v000-en"], "label": [1, 2],
                          "annotator": ["video-heuristic"] * 2})
    replace_tables(data, "relations", {"all": relations})
    result = train.main([*args, "--output-dir", str(tmp_path / "manual"), "--epochs", "1"])
    assert 0 <= result["test"]["t2v"]["R1"] <= 100
