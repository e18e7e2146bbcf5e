"""Krippendorff's alpha on the worked examples of Krippendorff (2011) and against a direct
loop over its definition; settling several annotators' labels into one."""

import itertools
import math

import numpy as np
import pytest

from rudder.evaluation.agreement import coincidences, krippendorff_alpha, reliability_data, settle

NA = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section A: binary
# data, two observers, no missing data; alpha = 0.095.
EXAMPLE_A = [[0, 1, 0, 0, 0, 0, 0, 0, 1, 0], [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]]
# Section B: nominal data, two observers (values a..e as 1..5); alpha = 0.692.
EXAMPLE_B = [[1, 1, 2, 2, 4, 3, 3, 3, 5, 4, 4, 1], [2, 1, 2, 2, 2, 3, 3, 3, 5, 4, 4, 4]]
# Section C: four observers, twelve units, missing values; nominal 0.743, ordinal 0.815,
# interval 0.849.
EXAMPLE_C = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NA, NA, NA],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NA, 3],
    [NA, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NA],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NA],
]


def direct_alpha(data, metric):
    """alpha = 1 - D_o / D_e with both disagreements summed over pairs of values, as the
    paper defines them: D_o within units (each unit's pairs weighted 1 / (m_u - 1)), D_e
    over every two pairable values."""
    data = np.asarray(data, dtype=float)
    units = [[v for v in column if not math.isnan(v)] for column in data.T]
    units = [u for u in units if len(u) >= 2]
    pairable = [v for u in units for v in u]
    n = len(pairable)
    ranks = sorted(set(pairable))
    counts = {v: pairable.count(v) for v in ranks}

    def delta(c, k):
        if metric == "nominal":
            return float(c != k)
        if metric == "interval":
            return (c - k) ** 2
        low, high = sorted((ranks.index(c), ranks.index(k)))
        between = sum(counts[ranks[g]] for g in range(low, high + 1))
        return (between - (counts[c] + counts[k]) / 2) ** 2

    observed = sum(
        delta(u[i], u[j]) / (len(u) - 1)
        for u in units
        for i, j in itertools.permutations(range(len(u)), 2)
    ) / n
    expected = sum(
        delta(pairable[i], pairable[j]) for i, j in itertools.permutations(range(n), 2)
    ) / (n * (n - 1))
    return 1 - observed / expected


@pytest.mark.parametrize(
    ("data", "metric", "expected"),
    [
        (EXAMPLE_A, "nominal", 0.095),
        (EXAMPLE_B, "nominal", 0.692),
        (EXAMPLE_C, "nominal", 0.743),
        (EXAMPLE_C, "ordinal", 0.815),
        (EXAMPLE_C, "interval", 0.849),
    ],
)
def test_the_papers_worked_examples(data, metric, expected):
    assert round(krippendorff_alpha(data, metric), 3) == expected


def test_the_coincidence_matrix_of_example_c():
    # the paper's table for section C: values 1..5, n = 40 pairable values
    values, observed = coincidences(EXAMPLE_C)
    assert values.tolist() == [1, 2, 3, 4, 5]
    assert observed.sum() == pytest.approx(40)
    assert observed.sum(1) == pytest.approx([9, 13, 10, 5, 3])
    assert observed[0, 0] == pytest.approx(7) and observed[0, 1] == pytest.approx(4 / 3)


@pytest.mark.parametrize("metric", ["nominal", "ordinal", "interval"])
@pytest.mark.parametrize("seed", range(4))
def test_matches_a_direct_loop_over_the_definition(metric, seed):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 4, size=(3 + seed % 2, 15)).astype(float)
    data[rng.random(data.shape) < 0.3] = np.nan
    assert krippendorff_alpha(data, metric) == pytest.approx(direct_alpha(data, metric))


def test_perfect_agreement_is_one_and_undefined_cases_are_none():
    assert krippendorff_alpha([[0, 1, 2, 1], [0, 1, 2, 1]], "ordinal") == pytest.approx(1.0)
    assert krippendorff_alpha([[1, 1, 1], [1, 1, 1]]) is None  # no variation: D_e = 0
    assert krippendorff_alpha([[1, NA], [NA, 2]]) is None  # no unit has two values
    assert krippendorff_alpha(np.zeros((0, 0))) is None
    with pytest.raises(ValueError, match="unknown metric"):
        krippendorff_alpha(EXAMPLE_A, "ratio-ish")


def record(a, b, annotator, label, time="2026-01-01T00:00:00+00:00", dataset="d"):
    return {"dataset": dataset, "caption_id_a": a, "caption_id_b": b, "annotator": annotator,
            "label": label, "time": time}


def test_reliability_data_puts_annotators_in_rows_and_pairs_in_columns():
    coders, units, data = reliability_data(
        [record("q", "c1", "asha", 1), record("q", "c1", "ravi", 2), record("q", "c2", "ravi", 0)])
    assert coders == ["asha", "ravi"] and units == [("d", "q", "c1"), ("d", "q", "c2")]
    assert np.array_equal(data, [[1, NA], [2, 0]], equal_nan=True)


def test_settle_by_agreement_majority_and_adjudication():
    records = [
        record("q", "a", "asha", 1, "2026-01-01T10:00:00+00:00"),
        record("q", "b", "asha", 1), record("q", "b", "ravi", 1, "2026-01-02T00:00:00+00:00"),
        record("q", "c", "asha", 2), record("q", "c", "ravi", 0), record("q", "c", "mina", 2),
        record("q", "d", "asha", 2), record("q", "d", "ravi", 0),
        record("q", "e", "asha", 2), record("q", "e", "ravi", 0), record("q", "e", "boss", 0),
        record("q", "f", "boss", 1), record("q", "f", "head", 2), record("q", "f", "asha", 1),
    ]
    settled, unsettled = settle(records, adjudicators=["boss", "head"])
    got = {r["caption_id_b"]: (r["label"], r["how"], r["annotators"]) for r in settled}
    assert got == {"a": (1, "single", 1), "b": (1, "agreed", 2), "c": (2, "majority", 3),
                   "e": (0, "adjudicated", 3)}
    assert next(r for r in settled if r["caption_id_b"] == "b")["time"].startswith("2026-01-02")
    assert [(r["caption_id_b"], r["why"]) for r in unsettled] == [
        ("d", "votes tie"), ("f", "adjudicators disagree")]
    assert unsettled[0]["labels"] == {"asha": 2, "ravi": 0}
    assert settle([]) == ([], [])
