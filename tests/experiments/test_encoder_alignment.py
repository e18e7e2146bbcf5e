"""experiments.encoder_alignment: Fisher's discriminant, tie-averaged ranks, what is fitted."""

import numpy as np
import pytest

from experiments.encoder_alignment import (
    alignment_table,
    fisher_projection,
    fisher_scatter,
    fitted_projections,
    report,
    seen_in_training,
    segment_ranks,
)


def test_the_scatter_matrices_equal_a_direct_loop_over_their_definition():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(9, 3))
    classes = ["a", "b", "a", "c", "b", "a", "c", "c", "b"]
    within, between = fisher_scatter(x, classes)
    mu = x.mean(axis=0)
    sw, sb = np.zeros((3, 3)), np.zeros((3, 3))
    for c in set(classes):
        rows = [x[i] for i in range(9) if classes[i] == c]
        mu_c = np.mean(rows, axis=0)
        for row in rows:
            sw += np.outer(row - mu_c, row - mu_c) / 9
        sb += len(rows) * np.outer(mu_c - mu, mu_c - mu) / 9
    np.testing.assert_allclose(within, sw, atol=1e-12)
    np.testing.assert_allclose(between, sb, atol=1e-12)


def test_fisher_keeps_what_separates_segments_and_drops_how_translations_differ():
    # two segments, each a pair of "translations" that differ along y only; the segments
    # differ along x: S_w = diag(0, 1), S_b = diag(1, 0); the discriminant is the x axis
    x = np.array([[1.0, 0.0], [1.0, 2.0], [-1.0, 0.0], [-1.0, 2.0]])
    mean, w = fisher_projection(x, ["s1", "s1", "s2", "s2"], d=1, shrinkage=1e-2)
    np.testing.assert_allclose(mean, [0.0, 1.0])
    assert abs(w[1, 0]) < 1e-9 and abs(w[0, 0]) > 0
    # w^T (S_w + s * mean eig(S_w) * I) w = 1: (0 + 0.01 * 0.5) * w_x^2 = 1
    assert w[0, 0] ** 2 == pytest.approx(1 / 0.005)
    # a new "translation" pair (same x, any y) projects to one point
    projected = (np.array([[1.0, 5.0], [1.0, -3.0]]) - mean) @ w
    assert projected[0, 0] == pytest.approx(projected[1, 0])


def test_fisher_maximises_the_rayleigh_quotient_over_every_direction():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40, 2)) * [1.0, 0.3]
    classes = [str(i // 4) for i in range(40)]
    within, between = fisher_scatter(x, classes)
    regularised = within + 0.1 * np.trace(within) / 2 * np.eye(2)
    _, w = fisher_projection(x, classes, d=1, shrinkage=0.1)
    w = w[:, 0]
    best = max((np.array([np.cos(a), np.sin(a)]) for a in np.linspace(0, np.pi, 3601)),
               key=lambda v: (v @ between @ v) / (v @ regularised @ v))
    assert (w @ between @ w) / (w @ regularised @ w) == pytest.approx(
        (best @ between @ best) / (best @ regularised @ best), rel=1e-5)
    with pytest.raises(ValueError, match="d=3"):
        fisher_projection(x, classes, d=3)


def test_segment_ranks_are_one_based_and_tie_averaged():
    queries = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    candidates = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    # query 0: scores 1, .5, 0 -> hit 0 first; query 1: 0, .5, 1 -> hit 0 third;
    # query 2: 1, 1, 1 -> hit 1 tied with two others: 1 + 0 + 2 / 2 = 2
    np.testing.assert_array_equal(segment_ranks(queries, candidates, np.array([0, 0, 1])),
                                  [1, 3, 2])


VECTORS = {  # an encoder that reads English and Hindi alike, Tamil rotated away
    "cut": [1.0, 0.0, 0.0], "kaato": [0.9, 0.1, 0.0], "vettu": [0.0, 0.0, 1.0],
    "paint": [0.0, 1.0, 0.0], "rang": [0.1, 0.9, 0.0], "vannam": [0.0, 0.7, 0.7],
}


def table(langs, texts, videos):
    return {"lang": langs, "text": texts, "video_id": videos, "start": [0.0] * len(langs),
            "end": [1.0] * len(langs)}


def recording_encoder(read):
    def encode(texts):
        read.extend(texts)
        return np.array([VECTORS[t] for t in texts])
    return encode


TRAIN = table(["en", "hi", "ta", "en", "hi", "ta"],
              ["cut", "kaato", "vettu", "paint", "rang", "vannam"], ["a", "a", "a", "b", "b", "b"])
TEST = table(["en", "hi", "ta", "en", "hi", "ta"],
             ["cut", "kaato", "vettu", "paint", "rang", "vannam"], ["c", "c", "c", "d", "d", "d"])


def test_the_projections_read_the_fitting_languages_training_text_only():
    read: list[str] = []
    projections = fitted_projections(recording_encoder(read), TRAIN, "en", ["en", "hi"])
    assert sorted(read) == ["cut", "kaato", "paint", "rang"]  # no Tamil text
    assert set(projections) == {"none", "null 8", "null 16", "null 32"}  # 3 dims: no Fisher


def test_the_nullspace_makes_a_translation_and_its_source_coincide():
    rng = np.random.default_rng(2)
    offset = rng.normal(size=40)  # Hindi = English + a fixed offset
    english = {"cut": rng.normal(size=40), "paint": rng.normal(size=40)}
    vectors = {**english, "kaato": english["cut"] + offset, "rang": english["paint"] + offset}
    train = table(["en", "hi", "en", "hi"], ["cut", "kaato", "paint", "rang"], ["a", "a", "b", "b"])
    projections = fitted_projections(lambda texts: np.array([vectors[t] for t in texts]), train,
                                     "en", ["en", "hi"])
    pair = projections["null 8"](np.array([english["cut"] + 0.3 * rng.normal(size=40)] * 2)
                                 + np.array([np.zeros(40), offset]))
    np.testing.assert_allclose(pair[0], pair[1], atol=1e-5)
    assert set(projections) == {"none", "null 8", "null 16", "null 32"}  # 40 dims: no Fisher


def test_the_table_on_a_hand_worked_case():
    result = alignment_table(recording_encoder([]), TRAIN, TEST, "en", ["en", "hi"])
    # candidates: the English texts cut, paint. hi: kaato -> cut (.9 vs .1), rang -> paint.
    assert result["none"]["hi"] == {"queries": 2, "R1": 100.0, "R5": 100.0, "MdR": 1.0}
    # ta: vettu scores 0 with both (tied: rank 1 + 0 + 1/2 = 1.5, no hit at 1);
    # vannam -> paint (.7 vs 0), rank 1
    assert result["none"]["ta"] == {"queries": 2, "R1": 50.0, "R5": 100.0, "MdR": 1.25}


def test_the_report_marks_the_fitted_and_the_zero_shot_languages():
    result = alignment_table(recording_encoder([]), TRAIN, TEST, "en", ["en", "hi"])
    text = report(result, {"source": "en", "fit_langs": ["en", "hi"], "dataset_note": "toy",
                           "command": "c", "encoder": "e", "candidates": 2,
                           "seen_in_training": seen_in_training(TRAIN, TEST, "en")})
    assert "| hi (fit; 2) | ta (ZS; 2) |" in text
    assert "| none | 100.0 / 100.0 / 1 | 50.0 / 100.0 / 1.25 |" in text
    assert "hi 100%, ta 100%" in text
    assert "Best R@1 of each zero-shot language over the projections: ta " in text


@pytest.mark.parametrize("argv, said", [
    (["--encoder", "words"], "--encoder words: a sentence encoder is needed"),
    (["--source", "ta"], "--fit-langs mr hi en: include --source ta"),
    (["--fit-langs", "mr", "xx"], "unsupported language 'xx' in --fit-langs"),
    (["--source", "klingon"], "unsupported language 'klingon' in --source"),
    (["--dataset", "/no/such/folder"], "dataset '/no/such/folder' is neither"),
])
def test_bad_input_is_one_error_line(argv, said, capsys):
    from experiments.encoder_alignment import main

    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and said in err and len(err.strip().splitlines()) == 1
