"""Target: rudder at MSR-VTT scale, from a release in Collaborative Experts' format.

1. writes a synthetic release: ``MSRVTT_data.json`` with 10,000 videos and 20 captions each
   (splits 6,513 / 497 / 2,990 from the real lists in ../shared/data/msrvtt when present),
   CE feature pickles at CE's dims (densenet161 2,208, senet154 2,048, i3d 1,024, r2p1d 512,
   and variable-length vggish audio (n, 128) missing for 10% of the videos) and CE's
   text-feature pickle (video id -> 20 arrays of 4-20 tokens x 300, like word2vec);
2. ``python -m datasets_scripts build msrvtt ... --features ... --text-features ...``;
3. ``python -m rudder.train`` for one epoch on the built folder (``data.text_encoder=dataset``);
4. ``python -m rudder.evaluate`` on the test split;
each in its own process, with wall time and peak resident memory (target < 4 GB). The
features are random, so the metrics say nothing; only time and memory count here.

Usage: python benchmarks/bench_scale.py [--workdir DIR] [--videos 10000] [--keep]
"""

from __future__ import annotations

import argparse
import json
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SHARED_LISTS = Path(__file__).resolve().parents[2] / "shared" / "data" / "msrvtt"
FIXED = {"densenet161-avg": 2208, "senet154-avg": 2048, "i3d-avg": 1024, "r2p1d-avg": 512}
CAPTIONS, WORD_DIM, MAX_RSS_GB = 20, 300, 4.0
WORDS = ["a", "man", "woman", "person", "is", "are", "playing", "cooking", "talking", "showing",
         "song", "car", "game", "video", "people", "the", "of"]


def split_of(videos: int) -> dict[str, str]:
    if videos == 10000 and SHARED_LISTS.is_dir():
        out = {}
        for name, split in (("train_list_full.txt", "train"), ("val_list_full.txt", "validate"),
                            ("test_list_full.txt", "test")):
            out.update(dict.fromkeys((SHARED_LISTS / name).read_text().split(), split))
        return out
    edges = (int(videos * 0.6513), int(videos * 0.701))
    return {f"video{i}": "train" if i < edges[0] else "validate" if i < edges[1] else "test"
            for i in range(videos)}


def write_release(root: Path, videos: int) -> tuple[Path, Path, Path]:
    """The release folder, the features folder and the text pickle."""
    rng = np.random.default_rng(0)
    ids = [f"video{i}" for i in range(videos)]
    splits = split_of(videos)
    src, features = root / "src", root / "features"
    src.mkdir(parents=True)
    features.mkdir()
    sentences = [{"video_id": v, "caption": " ".join(rng.choice(WORDS, int(rng.integers(4, 21)))),
                  "sen_id": i * CAPTIONS + k} for i, v in enumerate(ids) for k in range(CAPTIONS)]
    meta = [{"video_id": v, "split": splits[v], "start time": 0.0, "end time": 15.0,
             "category": 0, "id": i} for i, v in enumerate(ids)]
    (src / "MSRVTT_data.json").write_text(json.dumps({"videos": meta, "sentences": sentences}))
    for name, dim in FIXED.items():
        table = {v: rng.standard_normal(dim, dtype=np.float32) for v in ids}
        (features / f"{name}.pickle").write_bytes(pickle.dumps(table, protocol=4))
    audio = {v: (rng.standard_normal((int(rng.integers(10, 40)), 128), dtype=np.float32)
                 if rng.random() > 0.1 else np.nan) for v in ids}
    (features / "vggish-audio.pickle").write_bytes(pickle.dumps(audio, protocol=4))
    text = {v: [rng.standard_normal((len(s["caption"].split()), WORD_DIM), dtype=np.float32)
                for s in sentences[i * CAPTIONS:(i + 1) * CAPTIONS]] for i, v in enumerate(ids)}
    text_path = root / "w2v_MSRVTT.pickle"
    with text_path.open("wb") as handle:
        pickle.dump(text, handle, protocol=4)
    return src, features, text_path


def measured(stage: str, command: list[str]) -> dict:
    """Run ``command`` in a fresh process; wall seconds and that process tree's peak RSS."""
    probe = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
             "sys.exit(r.returncode)")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True, text=True,
                          check=False)
    seconds = time.perf_counter() - start
    if done.returncode:
        print(done.stdout[-2000:], done.stderr[-4000:], file=sys.stderr)
        raise SystemExit(f"{stage} failed with exit code {done.returncode}")
    peak_gb = int(done.stderr.strip().splitlines()[-1]) / 1024**2
    print(f"{stage}: {seconds:.1f} s, peak RSS {peak_gb:.2f} GB", flush=True)
    return {"stage": stage, "seconds": seconds, "peak_gb": peak_gb}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--videos", type=int, default=10000)
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)
    root = args.workdir or Path(tempfile.mkdtemp(prefix="rudder-scale-"))
    start = time.perf_counter()
    src, features, text = write_release(root, args.videos)
    print(f"release written in {time.perf_counter() - start:.0f} s under {root}", flush=True)
    python = [sys.executable, "-m"]
    stages = [
        measured("build", [*python, "datasets_scripts", "build", "msrvtt", "--src", str(src),
                           "--out", str(root / "built"), "--split", "full",
                           "--features", str(features), "--text-features", str(text)]),
        measured("train (1 epoch)", [*python, "rudder.train", "--dataset", str(root / "built"),
                                     "--output-dir", str(root / "run"), "--epochs", "1",
                                     "--set", "data.text_encoder=dataset",
                                     "--set", "data.caption_langs=[en]"]),
        measured("evaluate (test)",
                 [*python, "rudder.evaluate", str(root / "run"), "--split", "test"]),
    ]
    print("| stage | wall time (s) | peak RSS (GB) |\n|---|---|---|")
    for stage in stages:
        print(f"| {stage['stage']} | {stage['seconds']:.1f} | {stage['peak_gb']:.2f} |")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if all(s["peak_gb"] < MAX_RSS_GB for s in stages) else 1


if __name__ == "__main__":
    sys.exit(main())
