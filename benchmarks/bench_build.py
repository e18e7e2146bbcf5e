"""Benchmark: build a 100,000-caption RUDDER-layout dataset with 5 experts of 2,048 dims.

Targets: peak memory under 4 GB and at least 2,000 captions/s. The raw release
(videos.tsv, captions_<lang>.tsv, features/<expert>/<video_id>.npy; 20,000 videos x 5
captions, ~0.8 GB of features) is generated in a temporary folder first; only the build is
measured, run as ``python -m datasets_scripts build rudder`` in a child process whose peak
RSS is read with ``resource.getrusage(RUSAGE_CHILDREN)``. Prints one result line and exits
non-zero when a target is missed.

    python benchmarks/bench_build.py [--videos 20000] [--captions-per-video 5] [--dim 2048]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

LANGS = ("mr", "hi", "ta", "te", "en")
EXPERTS = ("scene", "object", "action", "motion", "audio")
WORDS = ("cut", "fold", "paste", "bottle", "paper", "glue", "colour", "draw", "toy", "car", "wheel")
MAX_RSS_BYTES = 4 * 1024**3
MIN_CAPTIONS_PER_SECOND = 2000.0


def generate(raw: Path, videos: int, per_video: int, dim: int, experts, seed: int = 0) -> int:
    """Write the raw release; returns the number of captions."""
    rng = np.random.default_rng(seed)
    raw.mkdir(parents=True)
    ids = [f"vid{i:06d}" for i in range(videos)]
    splits = np.where(
        np.arange(videos) % 10 < 8,
        "train",
        np.where(np.arange(videos) % 10 == 8, "validation", "test"),
    )
    with open(raw / "videos.tsv", "w", encoding="utf-8") as handle:
        handle.write("video_id\tsplit\tduration\n")
        handle.writelines(f"{v}\t{s}\t60\n" for v, s in zip(ids, splits, strict=False))
    words = rng.integers(0, len(WORDS), size=(videos, per_video, 4))
    with contextlib.ExitStack() as stack:
        handles = {
            lang: stack.enter_context(open(raw / f"captions_{lang}.tsv", "w", encoding="utf-8"))
            for lang in LANGS
        }
        for handle in handles.values():
            handle.write("video_id\ttext\tstart\tend\tkind\n")
        for i, video_id in enumerate(ids):
            for k in range(per_video):
                text = " ".join(WORDS[w] for w in words[i, k])
                line = f"{video_id}\t{text}\t{k * 5}\t{k * 5 + 4}\tcaption\n"
                handles[LANGS[k % len(LANGS)]].write(line)
    for expert in experts:
        folder = raw / "features" / expert
        folder.mkdir(parents=True)
        for start in range(0, videos, 1000):
            block = rng.standard_normal((min(1000, videos - start), dim), dtype=np.float32)
            for offset, row in enumerate(block):
                np.save(folder / f"{ids[start + offset]}.npy", row)
    return videos * per_video


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=20000)
    parser.add_argument("--captions-per-video", type=int, default=5)
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--experts", type=int, default=len(EXPERTS))
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary folder")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench_build.", dir=args.workdir))
    try:
        started = time.perf_counter()
        captions = generate(
            work / "raw", args.videos, args.captions_per_video, args.dim, EXPERTS[: args.experts]
        )
        print(
            f"generated {captions} captions in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        command = [
            sys.executable,
            "-m",
            "datasets_scripts",
            "build",
            "rudder",
            "--src",
            str(work / "raw"),
            "--out",
            str(work / "out"),
            "--strict",
        ]
        started = time.perf_counter()
        result = subprocess.run(
            command,
            env=env,
            capture_output=True,
            check=False,
            text=True,
            cwd=Path(__file__).resolve().parents[1],
        )
        seconds = time.perf_counter() - started
        if result.returncode != 0:
            print(result.stderr, file=sys.stderr)
            print("bench_build: FAILED (the build exited with an error)")
            return 1
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # kB on Linux
        rate = captions / seconds
        ok = peak < MAX_RSS_BYTES and rate >= MIN_CAPTIONS_PER_SECOND
        print(
            f"bench_build: {captions} captions, {args.videos} videos, {args.experts} experts x "
            f"{args.dim} dims: {seconds:.1f} s, {rate:,.0f} captions/s (target >= "
            f"{MIN_CAPTIONS_PER_SECOND:,.0f}), peak RSS {peak / 1024**2:,.0f} MB (target < 4096 MB)"
            f" -> {'OK' if ok else 'MISSED'}"
        )
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
