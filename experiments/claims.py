"""The claims README.md and experiments/README.md make, each with its test and one Holm
correction over all of them: ``experiments/claims.yaml`` -> ``experiments/results/claims.md``
and ``claims.csv`` (``python -m experiments.report claims [--check]``).

``claims.yaml`` lists every comparison the two READMEs state a result of (``suite``, ``a``,
``b``, ``direction``; ``b: best`` is the suite's best row chosen on validation), whatever
the result. Each is tested on its suite's committed ranks with the runs x videos test
(:func:`rudder.evaluation.significance.crossed_random_effects_test`, the test whose
false-positive rate ``python -m experiments.calibrate`` measures), and Holm's adjustment
runs over all of them at once (one family: every claim the READMEs make). A claim's
verdict: "A ranks better" or "B ranks better" when the adjusted p is below 0.05, else "no
difference shown".
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import yaml

from rudder.evaluation import significance

from . import tables
from .archive import ArchiveError, archive_path, read_archive

CLAIMS_FILE = Path(__file__).resolve().parent / "claims.yaml"
ALPHA = 0.05
KEYS = ("id", "suite", "a", "b", "direction", "metric", "runs_a", "runs_b", "mean_a", "mean_b",
        "diff", "diff_ci_low_runs", "diff_ci_high_runs", "p_runs", "p_holm_all", "verdict")


def load_claims(path: Path = CLAIMS_FILE) -> list[dict]:
    """The checked claims list."""
    try:
        document = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise ArchiveError(f"{path}: not a readable claims file ({error})") from None
    claims = document.get("claims") if isinstance(document, dict) else None
    if not isinstance(claims, list) or not claims:
        raise ArchiveError(f"{path}: expected 'claims: [{{id, suite, a, b, direction}}, ...]'")
    required = {"id", "suite", "a", "b", "direction"}
    for i, claim in enumerate(claims):
        if not isinstance(claim, dict) or not required <= set(claim) <= required | {"metric"}:
            raise ArchiveError(f"{path}: claims[{i}] needs exactly id, suite, a, b, direction "
                               "(and optionally metric)")
        if claim["direction"] not in tables.DIRECTION_TITLES:
            raise ArchiveError(f"{path}: claims[{i}].direction must be t2v or v2t")
        claim.setdefault("metric", "rank")
        if claim["metric"] not in tables.TEST_METRICS:
            raise ArchiveError(f"{path}: claims[{i}].metric must be one of "
                               f"{list(tables.TEST_METRICS)}")
    ids = [c["id"] for c in claims]
    if len(set(ids)) != len(ids):
        raise ArchiveError(f"{path}: claim ids must be unique")
    return claims


def evaluate(claims: list[dict], output: Path) -> list[dict]:
    """Each claim tested on its suite's archive, with Holm over all of them."""
    archives, results = {}, []
    for claim in claims:
        if claim["suite"] not in archives:
            archives[claim["suite"]] = read_archive(archive_path(output, claim["suite"]))
        rows, meta = archives[claim["suite"]]
        labels = [meta.get("best") if x == "best" else x for x in (claim["a"], claim["b"])]
        missing = [x for x in labels if x not in rows]
        if missing:
            raise ArchiveError(f"claim {claim['id']!r}: suite {claim['suite']!r} has no row "
                               f"{missing}; rows: {list(rows)}")
        a, b = (rows[str(x)] for x in labels)  # each a row's label, checked above
        d, metric = claim["direction"], claim["metric"]
        values_a, values_b = (tables.test_values(x, d, metric) for x in (a, b))
        test = significance.crossed_random_effects_test(values_a, values_b,
                                                        tables.video_of_queries(a, d))
        offset = 1.0 if metric == "rank" else 0.0
        results.append({
            **claim, "a": labels[0], "b": labels[1],
            "runs_a": len(a.seeds), "runs_b": len(b.seeds),
            "mean_a": float(np.nanmean(values_a) + offset),
            "mean_b": float(np.nanmean(values_b) + offset),
            "diff": test.estimate, "diff_ci_low_runs": test.low,
            "diff_ci_high_runs": test.high, "p_runs": test.pvalue,
        })
    adjusted = significance.holm([r["p_runs"] for r in results])
    for r, p in zip(results, adjusted, strict=True):
        r["p_holm_all"] = float(p)
        a_better = r["diff"] < 0 if r["metric"] == "rank" else r["diff"] > 0
        verb = "ranks better" if r["metric"] == "rank" else f"has the higher {r['metric']}"
        r["verdict"] = ("no difference shown" if p >= ALPHA else
                        f"{r['a'] if a_better else r['b']} {verb}")
    return results


def render_claims(output: Path, path: Path = CLAIMS_FILE) -> dict[str, str]:
    """``claims.md`` and ``claims.csv``."""
    results = evaluate(load_claims(path), output)
    lines = [
        "# Every claim of README.md and experiments/README.md, with its test",
        "",
        (f"- **Claims**: `experiments/claims.yaml` ({len(results)} comparisons); recomputed from "
        "the suites' committed ranks by `python -m experiments.report claims`."),
        ("- **Test**: runs x videos (`rudder.evaluation.significance."
        "crossed_random_effects_test`): the difference A - B of the metric's mean over every "
        "run of each row and every test query (mean rank: negative = A ranks better; nDCG in "
        "percent: positive = A is better) against its variance under a mixed model with "
        "random training-run and video effects; its false-positive rate between runs of one "
        "configuration is in calibration.md."),
        (f"- **Correction**: Holm over all {len(results)} claims at once; a verdict needs "
        f"p (Holm, all claims) < {ALPHA}."),
        "",
        ("| id | suite | A | B | direction | metric | runs A, B | mean A | mean B | "
        "diff [95% CI] | p | p, Holm over all claims | verdict |"),
        "|---" * 13 + "|",
    ]
    for r in results:
        lines.append(
            f"| {r['id']} | {r['suite']} | {r['a']} | {r['b']} | {r['direction']} | "
            f"{'mean rank' if r['metric'] == 'rank' else r['metric']} | "
            f"{r['runs_a']}, {r['runs_b']} | {r['mean_a']:.2f} | {r['mean_b']:.2f} | "
            f"{r['diff']:+.2f} [{r['diff_ci_low_runs']:+.2f}, "
            f"{r['diff_ci_high_runs']:+.2f}] | {tables._p(r['p_runs'])} | "
            f"{tables._p(r['p_holm_all'])} | {r['verdict']} |"
        )
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(KEYS)
    for r in results:
        writer.writerow([tables._num(r[k]) for k in KEYS])
    return {"claims.md": "\n".join(lines) + "\n", "claims.csv": buffer.getvalue()}
