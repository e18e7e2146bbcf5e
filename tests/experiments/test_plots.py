"""Hardest-negative relevance on hand-made matrices, and the PNGs."""

import numpy as np
import pytest

from experiments import plots, tables
from experiments.collect import RowResult
from rudder.evaluation import metrics

# 4 videos x 1 caption. Caption i's most similar other video is HARD[i];
# R[i, j] = (i + 1) / 10 + j / 100.
HARD = [2, 0, 3, 1]
SIMS = np.full((4, 4), 0.0)
SIMS[np.arange(4), np.arange(4)] = 5.0  # the positive is the most similar of all: must be skipped
SIMS[np.arange(4), HARD] = 1.0
REL = np.arange(1, 5)[:, None] / 10 + np.arange(4)[None, :] / 100


def test_hardest_negative_in_one_batch_by_hand():
    got = plots.hardest_negative_relevance(SIMS, REL, np.ones((4, 1), bool), batch_size=4, draws=3)
    expected = [REL[i, HARD[i]] for i in range(4)]  # 0.12, 0.20, 0.33, 0.41
    assert sorted(got) == pytest.approx(sorted(expected * 3))


def test_small_batches_only_see_their_own_videos():
    masks = np.ones((4, 1), bool)
    got = plots.hardest_negative_relevance(SIMS, REL, masks, batch_size=2, draws=20, seed=1)
    assert len(got) == 4 * 20
    # With pairs of videos, each anchor's only negative is its batch partner: any other video.
    allowed = {round(REL[i, j], 6) for i in range(4) for j in range(4) if i != j}
    assert {round(v, 6) for v in got} <= allowed
    assert {round(v, 6) for v in got} - {
        round(REL[i, HARD[i]], 6) for i in range(4)
    }  # not always the global hardest


def test_masked_captions_and_captionless_videos_are_left_out():
    sims = np.zeros((8, 4))  # 4 videos x 2 captions; video 3 has no valid caption
    sims[0::2] = SIMS
    masks = np.array([[1, 0], [1, 0], [1, 0], [0, 0]], bool)
    rel = np.zeros((8, 4))
    rel[0::2] = REL
    got = plots.hardest_negative_relevance(sims, rel, masks, batch_size=4, draws=2)
    # Video 3 is in no batch: caption 2's hardest negative is then video 0 or 1 (tied at 0 -> 0).
    assert sorted(got) == pytest.approx(sorted([REL[0, 2], REL[1, 0], REL[2, 0]] * 2))


def test_random_negatives_never_pick_the_positive():
    got = plots.hardest_negative_relevance(
        SIMS, REL, np.ones((4, 1), bool), 4, draws=50, random_negative=True
    )
    diagonal = {round(REL[i, i], 6) for i in range(4)}
    assert not {round(v, 6) for v in got} & diagonal
    assert len({round(v, 6) for v in got}) > 4  # not always the same negative


def test_pngs_are_written_and_small(tmp_path):
    rows = [
        RowResult(
            name,
            [0, 1],
            [],
            {"t2v": np.array([[0, 3, 1.5], [2, 0, 0]]), "v2t": np.array([[0, 1], [1, 0]])},
        )
        for name in ("MM", "PO")
    ]
    curves = plots.recall_curves(rows, tmp_path / "r.png", "title")
    hist = plots.hard_negative_histograms(
        {"MM": np.array([0, 0.5, 1.0]), "PO": np.array([0.2])},
        np.array([0.0, 0.1]),
        tmp_path / "h.png",
    )
    for path in (curves, hist):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size < 200_000
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind


def test_plotted_recall_is_the_tables_recall(monkeypatch, tmp_path):
    # Tie-averaged ranks; 0.5 is a first place shared by two videos: no hit at K=1 in the tables.
    ranks = np.array([[0, 0.5, 3, 7, 12, np.nan], [0.5, 0.5, 0, 4, 9, np.nan]])
    row = RowResult(
        "A",
        [0, 1],
        [{d: metrics.metrics_from_ranks(r) for d in ("t2v", "v2t")} for r in ranks],
        {"t2v": ranks, "v2t": ranks},
    )
    table = tables.summarise(row, n_resamples=10)
    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig) or path)
    plots.recall_curves([row], tmp_path / "r.png")
    for ax, direction in zip(figures[0].axes, ("t2v", "v2t"), strict=False):
        ks, curve = ax.lines[0].get_data()
        for k in (1, 5, 10):
            assert curve[list(ks).index(k)] == pytest.approx(table[direction][f"R{k}"]["mean"])
    assert table["t2v"]["R1"]["mean"] == pytest.approx(20.0)  # one untied first place per seed
