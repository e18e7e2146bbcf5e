"""Every benchmark script still runs (at a small size): a refactor that breaks one shows here,
not months later when someone re-measures a README figure. Whether a target is met is the
script's own business (it exits 1 on a miss, which small sizes may do); a traceback is not."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMALL = {
    "bench_build.py": ["--videos", "200"],
    "bench_default_run.py": [],  # the README's main job, full size (about a minute)
    "bench_feature_loading.py": ["--videos", "50", "--repeat", "1"],
    "bench_index.py": ["--videos", "3000", "--queries", "2", "--batch", "4", "--rounds", "1"],
    "bench_losses.py": ["--batch", "16", "--repeats", "1", "--threads", "1"],
    "bench_metrics.py": ["--repeat", "1"],
    "bench_scale.py": ["--videos", "150"],
    "bench_startup.py": ["--repeat", "1"],
    "bench_step.py": ["--batch-sizes", "4", "--steps", "1", "--threads", "1", "--device", "cpu"],
    "bench_subwords.py": ["--epochs", "1"],
    "bench_supervision.py": ["--n", "500"],
}


def test_every_benchmark_is_listed():
    scripts = {p.name for p in (ROOT / "benchmarks").glob("bench_*.py")}
    assert scripts == set(SMALL)


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SMALL))
def test_the_benchmark_runs(script, tmp_path):
    # TMPDIR: the scripts' temporary folders land in pytest's, which pytest prunes
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *SMALL[script]],
                          capture_output=True, text=True, timeout=600, env=env, cwd=ROOT,
                          check=False)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stdout.strip(), "the benchmark printed no figures"


def test_the_step_baseline_loss_is_collaborative_experts_loss():
    # bench_step's baseline uses CE's MaxMarginRankingLoss(fix_norm=True): both directions
    # against the diagonal, the diagonal terms dropped: rudder's mm (checked against CE)
    import torch

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from reference_ce import max_margin_loss
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from rudder import losses

    sims = torch.randn(6, 6, generator=torch.Generator().manual_seed(0))
    assert float(max_margin_loss(sims, 0.2)) == pytest.approx(
        float(losses.build("mm", margin=0.2)(sims)), rel=1e-6)
