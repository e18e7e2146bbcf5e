"""experiments.report, .claims and .calibration on hand-made rank archives (no training)."""

import numpy as np
import pytest
import yaml

from experiments import calibration, claims, report, tables
from experiments.archive import ArchiveError, archive_path, read_archive, write_archive
from experiments.collect import RowResult
from rudder.evaluation import significance


def _row(label, ranks_t2v, ranks_v2t, seeds=None):
    seeds = list(range(len(ranks_t2v))) if seeds is None else seeds
    videos = np.array([f"v{i}" for i in range(ranks_v2t.shape[1])])
    ids = np.array([f"v{i // 2}-en-{i % 2}" for i in range(ranks_t2v.shape[1])], dtype=object)
    return RowResult(label, seeds, [], {"t2v": ranks_t2v, "v2t": ranks_v2t}, {}, ids,
                     video_ids=videos)


def _ranks(rng, runs, shift=0.0, videos=16):
    """Tie-averaged-like ranks (multiples of 0.5) of 2 captions per video."""
    t2v = np.round(2 * np.clip(rng.normal(4 + shift, 3, (runs, 2 * videos)), 0, videos - 1)) / 2
    v2t = np.round(2 * np.clip(rng.normal(4 + shift, 3, (runs, videos)), 0, 2 * videos - 1)) / 2
    return t2v, v2t


def _suite_archive(folder, name="s", shift=-3.0):
    rng = np.random.default_rng(0)
    rows = {"MM": _row("MM", *_ranks(rng, 3)), "PO": _row("PO", *_ranks(rng, 3, shift)),
            "Fusion": _row("Fusion", *_ranks(rng, 1), seeds=[-1])}
    runs = {label: [{"key": f"{label}-k/seed-{s}", "commit": "abc1234567"} for s in row.seeds]
            for label, row in rows.items()}
    meta = {"suite": name, "rows": list(rows), "comparisons": [["PO", "MM"]], "best": "PO",
            "header": f"# {name}\n\n- **Data**: hand-made", "notes": ["A note."],
            "runs_at_epoch_cap": {"MM": 0, "PO": 0, "Fusion": 0}}
    write_archive(archive_path(folder, name), rows, runs, "f1ngerprint", meta)
    return rows


def test_archive_round_trip_without_pickle(tmp_path):
    rows = _suite_archive(tmp_path)
    back, meta = read_archive(archive_path(tmp_path, "s"))
    assert list(back) == ["MM", "PO", "Fusion"] and back["Fusion"].seeds == [-1]
    for label, row in rows.items():
        for d in ("t2v", "v2t"):
            np.testing.assert_array_equal(back[label].ranks[d], row.ranks[d])
    assert meta["dataset_fingerprint"] == "f1ngerprint" and meta["best"] == "PO"
    assert meta["runs"][0] == {"label": "MM", "seed": 0, "key": "MM-k/seed-0",
                               "commit": "abc1234567"}
    with np.load(archive_path(tmp_path, "s"), allow_pickle=False) as npz:
        assert npz["t2v_rank"].shape == (7, 32) and npz["t2v_rank"].dtype == np.float32
    (tmp_path / "bad-ranks.npz").write_bytes(b"not a zip")
    with pytest.raises(ArchiveError, match="not a readable ranks archive"):
        read_archive(tmp_path / "bad-ranks.npz")


def test_archive_query_ids_round_trip_and_are_required(tmp_path):
    rng = np.random.default_rng(0)
    row = _row("MM", *_ranks(rng, 2))
    row.query_ids[3] = None  # an empty caption slot
    runs = {"MM": [{"key": "k", "commit": "c"}] * 2}
    meta = {"suite": "s", "rows": ["MM"]}
    write_archive(archive_path(tmp_path, "s"), {"MM": row}, runs, "f", meta)
    back = read_archive(archive_path(tmp_path, "s"))[0]["MM"].query_ids
    assert back.dtype == object and back[3] is None and list(back) == list(row.query_ids)
    row.query_ids = None
    with pytest.raises(ArchiveError, match="no row names its test queries"):
        write_archive(archive_path(tmp_path, "t"), {"MM": row}, runs, "f", meta)


def test_report_writes_and_checks_a_suite(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tables, "BOOT_RESAMPLES", 500)
    _suite_archive(tmp_path)
    assert report.main(["s", "--output", str(tmp_path)]) == 0
    md = (tmp_path / "s.md").read_text()
    assert md.startswith("# s\n") and "A note." in md and "| Fusion | " in md
    assert "| PO | MM | t2v | mean rank | 3, 3 | 16 |" in md
    assert report.main(["s", "--output", str(tmp_path), "--check"]) == 0
    tests = (tmp_path / "s-tests.csv").read_text()
    (tmp_path / "s-tests.csv").write_text(
        tests.replace("s,PO,MM,t2v,rank,3,3", "s,PO,MM,t2v,rank,3,4"))
    capsys.readouterr()
    assert report.main(["s", "--output", str(tmp_path), "--check"]) == 1
    err = capsys.readouterr().err
    assert "s-tests.csv: differs from its recomputation" in err and "s.md" not in err
    (tmp_path / "s.md").unlink()
    assert report.main(["s", "--output", str(tmp_path), "--check"]) == 1
    assert "s.md: missing" in capsys.readouterr().err
    assert report.main(["missing", "--output", str(tmp_path), "--check"]) == 2


def test_claims_one_holm_over_every_claim(tmp_path, monkeypatch):
    monkeypatch.setattr(tables, "BOOT_RESAMPLES", 200)
    rows = _suite_archive(tmp_path)
    _suite_archive(tmp_path, "t", shift=0.0)
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump({"claims": [
        {"id": "s-po", "suite": "s", "a": "PO", "b": "MM", "direction": "t2v"},
        {"id": "s-best", "suite": "s", "a": "MM", "b": "best", "direction": "v2t"},
        {"id": "t-po", "suite": "t", "a": "PO", "b": "MM", "direction": "t2v"},
    ]}))
    results = claims.evaluate(claims.load_claims(path), tmp_path)
    videos = np.arange(32) // 2
    expected = significance.crossed_random_effects_test(rows["PO"].ranks["t2v"],
                                                        rows["MM"].ranks["t2v"], videos)
    assert results[0]["p_runs"] == expected.pvalue
    assert results[1]["b"] == "PO"  # "best" resolved from the archive
    holm = significance.holm([r["p_runs"] for r in results])
    assert [r["p_holm_all"] for r in results] == pytest.approx(list(holm))
    assert results[0]["verdict"] == ("PO ranks better" if holm[0] < 0.05 else "no difference shown")
    text = claims.render_claims(tmp_path, path)
    assert "Holm over all 3 claims at once" in text["claims.md"]
    header = next(line for line in text["claims.md"].splitlines() if line.startswith("| id"))
    row = next(line for line in text["claims.md"].splitlines() if line.startswith("| s-po"))
    assert header.count("|") == row.count("|")  # a cell per column
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"claims": [{"id": "x", "suite": "s", "a": "PO", "b": "XX",
                                               "direction": "t2v"}]}))
    with pytest.raises(ArchiveError, match="no row"):
        claims.evaluate(claims.load_claims(bad), tmp_path)
    bad.write_text(yaml.safe_dump({"claims": [{"id": "x", "suite": "s", "a": "PO"}]}))
    with pytest.raises(ArchiveError, match="needs exactly id, suite, a, b, direction"):
        claims.load_claims(bad)


def test_calibration_pairs_are_disjoint_and_seeded():
    pairs = calibration.pairs(60, 10, 7, seed=0)
    assert len(pairs) == 21 and pairs == calibration.pairs(60, 10, 7, seed=0)
    for partition in range(7):
        used = [i for a, b, p in pairs if p == partition for i in (*a, *b)]
        assert len(used) == len(set(used)) == 60  # one partition: disjoint pairs
    assert all(not set(a) & set(b) for a, b, _ in pairs)
    assert len(calibration.pairs(60, 5, 4, seed=0)) == 24
    with pytest.raises(ValueError, match="no pair"):
        calibration.pairs(8, 5, 1, seed=0)
    assert calibration.clopper_pearson(0, 20) == (0.0, pytest.approx(0.1684, abs=1e-4))


def test_calibration_report_from_a_pool(tmp_path, monkeypatch):
    monkeypatch.setattr(tables, "BOOT_RESAMPLES", 200)
    rng = np.random.default_rng(3)
    pool = _row("MM", *_ranks(rng, 20))
    meta = {"suite": "calibration", "rows": ["MM"], "comparisons": [], "header": "# Calibration",
            "notes": [], "arm_sizes": [5, 2], "partitions": 3, "seed": 0}
    runs = {"MM": [{"key": f"mm/seed-{s}", "commit": "c"} for s in pool.seeds]}
    write_archive(archive_path(tmp_path, "calibration"), {"MM": pool}, runs, "f", meta)
    files = report.render("calibration", tmp_path)
    md, table = files["calibration.md"], files["calibration.csv"].splitlines()
    assert "| runs x videos (crossed random effects) | t2v | 5 | 6 (2) |" in md
    assert "| p < 0.05 | rate [95% CI] | p < 0.10 |" in md
    assert len(table) == 1 + 2 * (2 * 3 + 5 * 3)  # both directions of every pair
    first = dict(zip(table[0].split(","), table[1].split(","), strict=True))
    a, b, _ = calibration.pairs(20, 5, 3, seed=0)[0]
    direct = significance.crossed_random_effects_test(pool.ranks["t2v"][a], pool.ranks["t2v"][b],
                                                      np.arange(32) // 2)
    assert float(first["p_runs"]) == pytest.approx(direct.pvalue, rel=1e-5)
    assert first["seeds_a"] == " ".join(map(str, a))
    assert tables.compare  # the same tests as the tables


def test_every_committed_claim_is_a_comparison_of_its_suite():
    from experiments.suites import load_suite

    for claim in claims.load_claims():
        suite = load_suite(claim["suite"])
        assert (claim["a"], claim["b"]) in suite.comparisons, claim["id"]
