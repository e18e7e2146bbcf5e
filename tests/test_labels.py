"""Pair labels: the enum keeps the values of docs/architecture.md, and every producer and
reader uses them."""

import re
from pathlib import Path

import numpy as np
import torch

from rudder.labels import HEURISTIC_LABELS, NO_LABEL, PAIR_LABELS, PairLabel

ROOT = Path(__file__).resolve().parents[1]


def test_values_are_the_design_convention():
    # docs/architecture.md: 0 negative, 1 partial, 2 positive, 3 description
    assert [(label.name, int(label)) for label in PairLabel] == [
        ("NEGATIVE", 0), ("PARTIAL", 1), ("POSITIVE", 2), ("DESCRIPTION", 3)]
    assert PAIR_LABELS == {"negative": 0, "partial": 1, "positive": 2, "description": 3}
    assert HEURISTIC_LABELS == (0, 1, 2) and NO_LABEL == -1 and NO_LABEL not in PAIR_LABELS.values()
    assert PairLabel.DESCRIPTION.text == "description"


def test_the_architecture_doc_states_the_same_values():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    stated = re.search(r"\*\*Pair labels\*\* `([^`]+)`", text).group(1)
    assert stated == ", ".join(f"{int(label)} {label.text}" for label in PairLabel)


def test_labels_are_plain_integers_in_tensors_and_arrays():
    assert torch.tensor([PairLabel.POSITIVE, PairLabel.DESCRIPTION]).tolist() == [2, 3]
    assert np.array([PairLabel.PARTIAL], dtype=np.int8).tolist() == [1]
    assert PairLabel(torch.tensor(3).item()) is PairLabel.DESCRIPTION


def test_the_partial_order_band_of_each_label():
    from rudder.losses.partial_order import PartialOrder

    loss = PartialOrder(p=0.02, m1=0.05, m2=0.15, n=0.2, description_as_partial=False)
    low, high = loss.bounds()
    inf = float("inf")
    assert (low[PairLabel.NEGATIVE].item(), high[PairLabel.NEGATIVE].item()) == (0.2, inf)
    assert (low[PairLabel.PARTIAL].item(), high[PairLabel.PARTIAL].item()) == (0.05, 0.15)
    assert (low[PairLabel.POSITIVE].item(), high[PairLabel.POSITIVE].item()) == (-inf, 0.02)
    assert (low[PairLabel.DESCRIPTION].item(), high[PairLabel.DESCRIPTION].item()) == (0.2, inf)
    low, high = PartialOrder(description_as_partial=True).bounds()
    assert low[PairLabel.DESCRIPTION] == low[PairLabel.PARTIAL]
    assert high[PairLabel.DESCRIPTION] == high[PairLabel.PARTIAL]


def test_batch_labels_produce_each_label():
    from rudder.supervision import batch_labels

    # caption 0: noun a, verb x; 1: noun a, verb y (partial); 2: noun b only; 3: nothing
    nouns = torch.tensor([[1.0, 0], [1, 0], [0, 1], [0, 0]])
    verbs = torch.tensor([[1.0, 0], [0, 1], [0, 0], [0, 0]])
    description = torch.zeros(4, 4, dtype=torch.bool)
    description[0, 2] = True
    manual = torch.full((4, 4), NO_LABEL)
    manual[3, 0] = PairLabel.POSITIVE
    labels = batch_labels(nouns, verbs, 0.5, 0.5, manual=manual, description=description)
    assert labels[0, 1] == PairLabel.PARTIAL
    assert labels[0, 2] == PairLabel.DESCRIPTION
    assert labels[0, 3] == PairLabel.NEGATIVE
    assert labels[3, 0] == PairLabel.POSITIVE
    assert labels.diagonal().eq(PairLabel.POSITIVE).all()
