"""Captions whose class columns are null were never labelled (``heuristics label --langs``):
they do not count in a video's class set, and loading says so."""

import logging
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import torch

from rudder.training.distributed import DistContext
from rudder.training.trainer import Trainer

from ..factories import tiny_config


def test_unlabelled_captions_leave_the_video_class_sets_alone(tiny_dataset, tmp_path, caplog):
    data = tmp_path / "data"
    shutil.copytree(tiny_dataset, data)
    path = data / "captions" / "train.parquet"
    table = pq.read_table(path)
    english = pa.array([lang == "en" for lang in table.column("lang").to_pylist()])
    for name in ("nouns", "verbs", "noun_classes", "verb_classes"):  # as `label --langs mr`
        column = table.column(name)
        table = table.set_column(table.schema.get_field_index(name), name,
                                 pa.compute.if_else(english, pa.nulls(len(table), column.type),
                                                    column))
    pq.write_table(table, path)
    logger = logging.getLogger("rudder.data.loader")  # training runs stop "rudder" propagating
    logger.addHandler(caplog.handler)
    try:
        split = Trainer(tiny_config(data), tmp_path / "run", DistContext())._load("train")
    finally:
        logger.removeHandler(caplog.handler)
    assert "have no noun/verb classes (never labelled)" in caplog.text
    assert "--langs en" in caplog.text
    marathi = torch.tensor([[lang == "mr" for lang in row] for row in split.caption_langs])
    assert torch.equal(split.labelled, marathi & split.caption_mask)
    # each video has one Marathi caption: at rho 0.75 its classes are that caption's (1/1),
    # not lost to an unlabelled English caption (1/2)
    nouns, verbs = split.video_classes(0.75)
    own = marathi.float().argmax(1)
    rows = torch.arange(split.num_videos)
    assert torch.equal(nouns.bool(), split.nouns[rows, own])
    assert torch.equal(verbs.bool(), split.verbs[rows, own])
