"""Model selection: RUDDER's two criteria and the tie rule, on hand-made validation results."""

import math

import pytest

from rudder.config import SELECTIONS
from rudder.evaluation.selection import improves, selection_key, selection_score, tie_break


def result(r5, r10, r50, mdr, mnr):
    values = {"R1": 1.0, "R5": r5, "R10": r10, "R50": r50, "MdR": mdr, "MnR": mnr}
    return {"t2v": values, "v2t": values}


def test_both_rudder_criteria_by_hand():
    r = result(8.0, 27.0, 64.0, 4.0, 9.0)
    assert selection_score(r, "t2v.gmean_r5_r10_r50") == pytest.approx(24.0)  # (8*27*64)^(1/3)
    assert selection_score(r, "t2v.gmean_mdr_mnr") == pytest.approx(-6.0)  # sqrt(4*9), minimised
    assert {"t2v.gmean_mdr_mnr", "v2t.gmean_mdr_mnr"} <= set(SELECTIONS)


def test_tie_break_is_the_other_rudder_criterion():
    assert tie_break("t2v.gmean_r5_r10_r50") == "t2v.gmean_mdr_mnr"
    assert tie_break("v2t.gmean_mdr_mnr") == "v2t.gmean_r5_r10_r50"
    assert tie_break("t2v.R1") == "t2v.gmean_r5_r10_r50"


def pick(results, selection):
    """The best epoch (1-based) as the trainer keeps it, epoch by epoch."""
    best, best_epoch = (-math.inf, -math.inf), 0
    for epoch, r in enumerate(results, 1):
        key = selection_key(r, selection)
        if improves(key, best):
            best, best_epoch = key, epoch
    return best_epoch


def test_equal_score_is_decided_by_the_other_criterion_then_the_earlier_epoch():
    first = result(8.0, 27.0, 64.0, 4.0, 9.0)
    same_recall_lower_ranks = result(8.0, 27.0, 64.0, 4.0, 4.0)  # gmean(MdR, MnR) 4 < 6
    same_recall_higher_ranks = result(8.0, 27.0, 64.0, 9.0, 9.0)
    assert pick([first, same_recall_lower_ranks], "t2v.gmean_r5_r10_r50") == 2
    assert pick([first, same_recall_higher_ranks], "t2v.gmean_r5_r10_r50") == 1
    assert pick([first, first], "t2v.gmean_r5_r10_r50") == 1  # equal on both: earlier stays
    # Minimised criterion: lower gmean(MdR, MnR) wins; a tie goes to the higher recall gmean.
    better_recall = result(9.0, 27.0, 64.0, 4.0, 9.0)
    assert pick([first, better_recall], "t2v.gmean_mdr_mnr") == 2
    assert pick([first, same_recall_lower_ranks], "t2v.gmean_mdr_mnr") == 2
    assert pick([same_recall_lower_ranks, first], "t2v.gmean_mdr_mnr") == 1
