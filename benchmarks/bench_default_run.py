"""Targets (docs/benchmarks.md): the default `python -m rudder.train` finishes in under 3 minutes on
2 CPU cores with peak memory under 2 GB, early stopping (not the epoch cap) ends it, and its
test t2v R@10 is at least 3x chance; on a GPU machine the default run is faster
on CUDA than on the CPU (``--devices cpu cuda`` runs it on each and compares).

Usage: python benchmarks/bench_default_run.py [--output-dir DIR] [--devices cpu cuda]
Runs the real CLI in a subprocess (sample dataset build included when not cached) and
prints one result line per device; exits 1 when a target is missed. The memory figure is
the peak over the runs so far (``RUSAGE_CHILDREN``), so the first device's line is its own.
The runs are kept under ``--output-dir``; without it they go to a temporary folder that is
removed at exit.
"""

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rudder.runs.layout import predictions_file, read_config, read_metrics, read_predictions

MAX_SECONDS = 180
MAX_RSS_GB = 2.0


def run_once(out: Path, device: str | None) -> tuple[float, bool]:
    """One default run into ``out``: (seconds, targets met); prints its line."""
    start = time.perf_counter()
    flags = [] if device is None else ["--device", device]
    subprocess.run(
        [sys.executable, "-m", "rudder.train", "--output-dir", str(out), "--overwrite", *flags],
        check=True,
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
        f"default run{'' if device is None else f' on {device}'}: {seconds:.1f} s "
        f"(target < {MAX_SECONDS}), peak RSS {peak_gb:.2f} GB "
        f"(target < {MAX_RSS_GB}), {metrics['epochs_run']} of at most {cap} epochs, best epoch "
        f"{metrics['best_epoch']} (early stopping: {stopped_early}), test t2v R@10 {r10:.1f}% vs "
        f"chance {chance:.1f}% (ratio {r10 / chance:.1f}, target >= 3) -> "
        f"{'OK' if ok else 'MISSED'}"
    )
    return seconds, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, help="keep the runs here")
    parser.add_argument("--devices", nargs="+", choices=("cpu", "cuda"),
                        help="run once per device (default: once, on the run's default device)")
    args = parser.parse_args()
    if args.output_dir:
        return run_devices(args.output_dir, args.devices or [None])
    with tempfile.TemporaryDirectory(prefix="rudder-bench-") as root:
        return run_devices(Path(root) / "run", args.devices or [None])


def run_devices(out: Path, devices: list) -> int:
    """One default run per device (``out``, or ``out-DEVICE`` when devices are named) and the
    CUDA-vs-CPU comparison when both ran; the exit code."""
    results = {d: run_once(out.with_name(f"{out.name}-{d}") if d else out, d) for d in devices}
    ok = all(met for _, met in results.values())
    if {"cpu", "cuda"} <= set(results):
        faster = results["cuda"][0] < results["cpu"][0]
        print(f"CUDA {results['cuda'][0]:.1f} s vs CPU {results['cpu'][0]:.1f} s: "
              f"{results['cuda'][0] / results['cpu'][0]:.2f}x (target < 1) -> "
              f"{'OK' if faster else 'MISSED'}")
        ok = ok and faster
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
