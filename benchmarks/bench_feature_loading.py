"""Target: reading expert features runs at >= 50% of pyarrow's zero-copy throughput.

Writes a dataset folder with one fixed-size expert (``--videos`` x 2,048) and one
variable-length expert (30-90 frames x 128, subsampled to ``max_frames`` = 32 on load), then
times :func:`rudder.data.loader.load_videos` against the floor of the same work in pyarrow:
``pq.read_table`` of the same parquet files plus a zero-copy ``to_numpy`` of the value
buffer. Prints one line per expert and exits 1 when a ratio is under the target.

Usage: python benchmarks/bench_feature_loading.py [--videos 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rudder.data.card import Card
from rudder.data.layout import DatasetFolder, DatasetMeta, ExpertInfo
from rudder.data.layout_writer import DatasetWriter
from rudder.data.loader import load_videos

TARGET = 0.5


def write_dataset(path: Path, videos: int) -> Path:
    rng = np.random.default_rng(0)
    ids = [f"v{i:06d}" for i in range(videos)]
    meta = DatasetMeta("bench", "1", ["en"],
                       {"appearance": ExpertInfo(2048), "audio": ExpertInfo(128, True)})
    with DatasetWriter(path, meta, Card("Bench", "Feature-loading benchmark data.")) as writer:
        writer.write_videos(pa.table({"video_id": ids, "duration": [10.0] * videos,
                                      "split": ["train"] * videos,
                                      "experts": [["appearance", "audio"]] * videos}))
        writer.write_captions(pa.Table.from_pylist([
            {"caption_id": f"{v}-0", "video_id": v, "lang": "en", "text": "a video", "start": 0.0,
             "end": 1.0, "kind": "describing", "machine_translated": False} for v in ids]))
        writer.write_expert("appearance",
                            [(ids, rng.normal(size=(videos, 2048)).astype(np.float32))])
        frames = [rng.normal(size=(int(rng.integers(30, 90)), 128)).astype(np.float32) for _ in ids]
        writer.write_expert("audio", [(ids, frames)])
    return path


def best_of(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def pyarrow_floor(folder: DatasetFolder, expert: str) -> None:
    path = next((folder.root / "features" / expert).glob("train*.parquet"))
    column = pq.read_table(path).column("feature").combine_chunks()
    values = column.flatten()
    while pa.types.is_fixed_size_list(values.type) or pa.types.is_list(values.type):
        values = values.flatten()
    values.to_numpy(zero_copy_only=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rudder-feat-") as root:
        folder = DatasetFolder(write_dataset(Path(root) / "d", args.videos))
        return 0 if compare(folder, args.repeat) else 1


def compare(folder: DatasetFolder, repeat: int) -> bool:
    """Prints one line per expert; whether every ratio meets the target."""
    ok = True
    for expert in ("appearance", "audio"):
        ours = best_of(repeat, lambda e=expert: load_videos(folder, "train", [e], max_frames=32))
        floor = best_of(repeat, lambda e=expert: pyarrow_floor(folder, e))
        ratio = floor / ours
        ok &= ratio >= TARGET
        print(f"{expert}: load_videos {ours * 1e3:.1f} ms, "
              f"pyarrow zero-copy read {floor * 1e3:.1f} ms, "
              f"throughput {100 * ratio:.0f}% of pyarrow (target >= {100 * TARGET:.0f}%)")
    return ok


if __name__ == "__main__":
    sys.exit(main())
