"""Targets (issues 2, 10): the default `python -m rudder.train` finishes in under 3 minutes on
2 CPU cores with peak memory under 2 GB, early stopping (not the epoch cap) ends it, and its
test t2v R@10 is at least 3x chance.

Usage: python benchmarks/bench_default_run.py [--output-dir DIR]
Runs the real CLI in a subprocess (sample dataset build included when not cached) and
prints one result line; exits 1 when a target is missed.
"""

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rudder.run_layout import predictions_file, read_config, read_metrics, read_predictions

MAX_SECONDS = 180
MAX_RSS_GB = 2.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path)
    args = parser.parse_args()
    out = args.output_dir or Path(tempfile.mkdtemp(prefix="rudder-bench-")) / "run"
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "rudder.train", "--output-dir", str(out), "--overwrite"], check=True
    )
    seconds = time.perf_counter() - start
    peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024**2
    metrics = read_metrics(out)
    num_videos = len(read_predictions(predictions_file(out, "test")).video_ids)
    r10 = metrics["test"]["t2v"]["R10"]
    chance = 100 * 10 / num_videos
    cap = read_config(out)["epochs"]
    stopped_early = metrics["epochs_run"] < cap
    ok = seconds < MAX_SECONDS and peak_gb < MAX_RSS_GB and r10 >= 3 * chance and stopped_early
    print(
        f"default run: {seconds:.1f} s (target < {MAX_SECONDS}), peak RSS {peak_gb:.2f} GB "
        f"(target < {MAX_RSS_GB}), {metrics['epochs_run']} of at most {cap} epochs, best epoch "
        f"{metrics['best_epoch']} (early stopping: {stopped_early}), test t2v R@10 {r10:.1f}% vs "
        f"chance {chance:.1f}% (ratio {r10 / chance:.1f}, target >= 3) -> {'OK' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
