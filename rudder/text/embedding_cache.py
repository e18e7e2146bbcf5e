"""Sentence embeddings cached on disk, keyed by (model id, weights hash, text).

A folder per model under the rudder cache (``$RUDDER_CACHE/text-embeddings/<model>-<hash>/``)
holds shards ``<name>.npz``: ``keys`` (``S64``, the SHA-256 (hex) of each text exactly as fed to the
model, prompt prefix included) and ``vectors`` (float32, one row per key). Each encoding call
writes its new vectors as one more shard through :func:`rudder.atomic.atomic_savez`, so a
reader sees whole shards only and concurrent writers never overwrite each other (a shard's
name is the hash of its keys). Shards are read with ``allow_pickle=False``; a damaged one is
skipped with a warning (its texts are encoded again). Training, evaluation and the app
therefore encode a caption once per model and weights.
"""

from __future__ import annotations

import hashlib
import logging
import re
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rudder.atomic import atomic_savez
from rudder.paths import cache_dir

log = logging.getLogger(__name__)


def text_key(text: str) -> bytes:
    """SHA-256 of ``text`` in UTF-8, as 64 ASCII hex digits (numpy's ``S`` arrays drop
    trailing NUL bytes, which a raw digest may end with)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest().encode("ascii")


def file_hash(paths, chunk: int = 1 << 20) -> str:
    """SHA-256 (hex) over the bytes of ``paths`` in the given order (each file's name and
    size are hashed before its bytes, so moving bytes between files changes the hash)."""
    digest = hashlib.sha256()
    for path in map(Path, paths):
        digest.update(f"{path.name}\0{path.stat().st_size}\0".encode())
        with path.open("rb") as handle:
            while block := handle.read(chunk):
                digest.update(block)
    return digest.hexdigest()


class EmbeddingCache:
    """The cached vectors of one model (``model_id``, ``weights_hash``), ``dim`` wide."""

    def __init__(self, model_id: str, weights_hash: str, dim: int, root: Path | None = None):
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("._") or "model"
        self.folder = (root or cache_dir("text-embeddings")) / f"{safe[:60]}-{weights_hash[:16]}"
        self.model_id, self.weights_hash, self.dim = model_id, weights_hash, dim
        self._vectors: dict[bytes, np.ndarray] = {}
        self._seen: set[str] = set()

    def _refresh(self) -> None:
        """Read the shards written since the last look (by this or another process)."""
        if not self.folder.is_dir():
            return
        for shard in sorted(self.folder.glob("*.npz")):
            if shard.name in self._seen:
                continue
            self._seen.add(shard.name)
            try:
                with np.load(shard, allow_pickle=False) as data:
                    keys, vectors = data["keys"], data["vectors"]
                if keys.dtype != np.dtype("S64") or vectors.shape != (len(keys), self.dim):
                    raise ValueError(f"keys {keys.dtype} {keys.shape}, vectors {vectors.shape}")
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
                log.warning("%s: damaged embedding-cache shard skipped (%s); its texts are "
                            "encoded again", shard, error)
                continue
            self._vectors.update(zip(keys.tolist(), vectors.astype(np.float32), strict=False))

    def count_missing(self, texts) -> int:
        """How many distinct ``texts`` are not cached yet: what :meth:`get` would encode
        (for the progress report of a pass)."""
        self._refresh()
        return len({key for key in map(text_key, texts) if key not in self._vectors})

    def get(self, texts: list[str], encode: Callable[[list[str]], np.ndarray],
            chunk: int = 2048) -> np.ndarray:
        """Vectors ``(len(texts), dim)`` of ``texts``: cached ones read, the others encoded
        with ``encode`` (list of str -> (n, dim) array) ``chunk`` distinct texts at a time,
        each chunk written as a shard before the next starts."""
        keys = [text_key(t) for t in texts]
        self._refresh()
        missing: dict[bytes, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in self._vectors:
                missing.setdefault(key, text)
        todo = list(missing.items())
        for start in range(0, len(todo), chunk):
            part = todo[start : start + chunk]
            vectors = np.asarray(encode([text for _, text in part]), dtype=np.float32)
            if vectors.shape != (len(part), self.dim):
                raise ValueError(f"{self.model_id}: encoded {len(part)} texts into an array of "
                                 f"shape {vectors.shape}, expected ({len(part)}, {self.dim})")
            shard_keys = np.array([key for key, _ in part], dtype="S64")
            name = hashlib.sha256(shard_keys.tobytes()).hexdigest()[:24] + ".npz"
            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_savez(self.folder / name, keys=shard_keys, vectors=vectors)
            self._seen.add(name)
            self._vectors.update(zip(shard_keys.tolist(), vectors, strict=True))
        if not keys:
            return np.zeros((0, self.dim), np.float32)
        return np.stack([self._vectors[key] for key in keys])
