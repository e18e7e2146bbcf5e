"""PO(M) on the sample: manual relations and the description heuristic change batch labels."""

import pytest
import torch

from rudder.config import from_dict
from rudder.data.batching import epoch_batches
from rudder.training.distributed import DistContext
from rudder.training.trainer import Trainer

pytestmark = pytest.mark.slow  # loads the sample dataset twice (~15 s)


def trainer(tmp_path, **supervision):
    config = from_dict({"loss": {"name": "po"}, "supervision": supervision,
                        "model": {"shared_dim": 16}})
    return Trainer(config, tmp_path, DistContext())


def batches_of(run, pairs, pinning="both"):
    mask = run.splits["train"].caption_mask
    return epoch_batches(mask, 64, torch.Generator().manual_seed(0), "random", pairs, pinning)


def manual_lookup(run, videos, slots):
    """(B, B) manual labels of a batch, -1 where unannotated (the diagonal too)."""
    ids = list(run.splits["train"].caption_ids[videos.numpy(), slots.numpy()])
    return run.supervision.relations.lookup(ids, ids).fill_diagonal_(-1)


def test_manual_relations_and_descriptions_reach_the_batch_labels(tmp_path):
    plain = trainer(tmp_path / "plain")
    manual = trainer(tmp_path / "manual", manual_relations=True, relation_batches=True,
                     description_labels=True)
    found = changed = described = 0
    for videos, slots in batches_of(manual, manual.supervision.relation_pairs):
        with_manual = manual.supervision.batch(videos, slots, slots, None)["labels"]
        without = plain.supervision.batch(videos, slots, slots, None)["labels"]
        lookup = manual_lookup(manual, videos, slots)
        known = lookup >= 0
        assert torch.equal(with_manual[known], lookup[known])  # every annotated pair is used
        found += int(known.sum())
        changed += int((with_manual != without)[known].sum())
        described += int(((with_manual == 3) & (without != 3) & ~known).sum())
    by_chance = sum(int((manual_lookup(manual, v, s) >= 0).sum())
                    for v, s in batches_of(manual, None))
    drawn = sum(int((manual_lookup(manual, v, s) >= 0).sum())
                for v, s in batches_of(manual, manual.supervision.relation_pairs, "drawn"))
    print(f"annotated pairs in batches: {found} relation-aware, {drawn} with pinning drawn, "
          f"{by_chance} by chance; {changed} labels changed by relations, {described} by the "
          "description heuristic")
    # Hundreds of annotated pairs (both orders) reach the batches each epoch; without the
    # relation-aware sampler only a handful land in a batch by chance, and pinning only the
    # video that did not draw its annotated caption lies in between.
    assert found > 200 > 10 * by_chance
    assert found > drawn > 5 * by_chance
    assert changed > 10 and described > 10
