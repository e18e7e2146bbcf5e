"""The app's quick model answers each of its languages: own video in the app's top 10.

``python benchmarks/bench_quick_model.py [--run RUN] [--runs DIR]`` trains the model that
``python -m app`` trains when it finds none (its quick settings, on the embedded simulated
sample) into ``DIR`` (default: a temporary folder), or takes ``RUN``, then searches every
test caption of each language as the app does (its search engine over the whole sample,
every split's videos: 800) and counts how often the caption's own video is among the first
10. Chance is 10 / 800 = 1.25%; the target is at least 5x chance for every language.

Prints the training time, the machine's load and each language's hit rate; exits 1 when a
language misses the target.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine_line  # benchmarks/machine.py, beside this script

TARGET = 5.0  # times chance
K = 10


def own_video_hits(engine, captions, k: int = K, batch: int = 256) -> np.ndarray:
    """Per caption row of ``captions`` (video_id, text, lang): whether the app's engine
    ranks its own video among the first ``k`` of its index."""
    hits = []
    column = {video: i for i, video in enumerate(engine.index.video_ids)}
    for start in range(0, len(captions), batch):
        part = captions.iloc[start : start + batch]
        with torch.no_grad():
            emb, logits = engine.embed_texts(list(part["text"]), list(part["lang"]))
        found = engine.index.search(emb, logits, k=k)
        own = torch.as_tensor([column[v] for v in part["video_id"]])
        hits.append((found.indices == own[:, None]).any(dim=1).numpy())
    return np.concatenate(hits) if hits else np.zeros(0, bool)


def measure(run_dir: Path) -> dict[str, float]:
    """Language -> percent of its test captions whose own video is in the top 10."""
    from app.__main__ import engine_for
    from app.collection import Collection
    from rudder.evaluation.loading import load_run

    run = load_run(run_dir)
    collection = Collection(run.dataset)
    engine = engine_for(run, collection)
    captions = collection.captions
    test = captions[captions["split"] == "test"]
    out = {}
    for lang in run.dataset.meta.languages:
        rows = test[test["lang"] == lang]
        out[lang] = 100 * float(own_video_hits(engine, rows).mean())
    out["_videos"] = len(engine.index)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, help="measure this run instead of training one")
    parser.add_argument("--runs", type=Path, help="train the quick model under this folder")
    parser.add_argument("--epochs", type=int, help="at most this many epochs (default: the "
                        "app's; fewer for a smoke test)")
    args = parser.parse_args(argv)
    print(machine_line(), flush=True)
    run_dir, scratch = args.run, None
    if run_dir is None:
        from app.__main__ import QUICK_EPOCHS, train_quick
        from rudder.data.lookup import resolve_dataset

        scratch = None if args.runs else tempfile.TemporaryDirectory(prefix="bench-quick-")
        runs = args.runs or Path(scratch.name)
        started, cpu = time.monotonic(), time.process_time()
        run_dir = train_quick(runs, "sample", args.epochs or QUICK_EPOCHS,
                              resolve_dataset("sample").meta.languages)
        print(f"trained {run_dir} in {time.monotonic() - started:.0f} s wall, "
              f"{time.process_time() - cpu:.0f} s CPU", flush=True)
    result = measure(run_dir)
    if run_dir != args.run and scratch is not None:
        scratch.cleanup()
    videos = result.pop("_videos")
    chance = 100 * K / videos
    print(f"\nown video in the top {K} of {videos} (chance {chance:.2f}%), test captions:")
    print("| lang | hits | x chance |\n|---|---|---|")
    missed = []
    for lang, value in result.items():
        print(f"| {lang} | {value:.1f}% | {value / chance:.1f} |")
        if value < TARGET * chance:
            missed.append(lang)
    if missed:
        print(f"\nMISSED: {', '.join(missed)} below {TARGET:g}x chance")
        return 1
    print(f"\nevery language at least {TARGET:g}x chance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
