"""Sentence embeddings cached on disk, keyed by (model id, weights hash, text), safe to share.

A folder per model under the rudder cache (``$RUDDER_CACHE/text-embeddings/<model>-<hash>/``)
holds shards ``<name>.npz``, each a zip of three arrays:

- ``keys``: ``S64``, the SHA-256 (hex) of each text exactly as fed to the model (prompt
  prefix included);
- ``vectors``: float32 ``(rows, dim)``, one row per key;
- ``meta``: the shard's manifest, UTF-8 JSON as ``uint8``: :data:`FORMAT`, the full model
  id, weights hash and dim (the exact key material; the folder name is a shortened form),
  ``rows``, ``dtype`` and ``sha256`` over the bytes of ``keys`` then ``vectors``.

Each encoding call writes its new vectors as one more shard, named by the hash of its keys,
through a temporary file and a rename (:func:`rudder.atomic.replacing`): a reader sees whole
shards only, concurrent writers of the same entry replace one whole file with another, and a
shard is made writable by its owner only. Training, evaluation and the app therefore encode
a caption once per model and weights, whoever asks.

A shard is served only when it is what rudder wrote and still matches it (the threat model
is in docs/models.md, "The text-embedding cache"): a regular file (not followed through a
link; opened non-blocking, so a FIFO cannot hang a reader) of at most the size its rows
could take; a zip of exactly the three members whose declared uncompressed sizes fit the
manifest's rows x dim before anything is decompressed; a manifest naming this model,
weights and dim; arrays of the manifest's dtype and shape whose SHA-256 matches; distinct
hex keys; finite vectors. A shard written by another user (or writable by others) is also
spot-checked: up to :data:`SPOT_CHECK` of the texts served from it, drawn at random, are
encoded again and must agree within :data:`TOLERANCE`, so rows that were permuted or
planted are caught whoever wrote the manifest. Anything else is ignored (one warning line)
and its texts encoded again; the new shard takes the same name when the same texts are
asked for, so the rename replaces the bad file.

``python -m rudder.text.embedding_cache prune [--dry-run] [--root DIR]`` deletes the files
of the cache that no reader would serve (:func:`stale_shards`: shards of an older rudder,
damaged or foreign files) and that the user owns; another user's are listed, not touched.
"""

from __future__ import annotations

import getpass
import hashlib
import io
import json
import logging
import os
import random
import re
import stat
import threading
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rudder.atomic import replacing
from rudder.paths import cache_dir

log = logging.getLogger(__name__)

FORMAT = "rudder-embedding-cache/2"
MAX_ROWS = 1 << 14  # rows of one shard
MAX_META = 1 << 16  # bytes of a manifest
NPY_HEADER = 4096  # the most bytes an .npy header may add to its data
SPOT_CHECK = 8  # texts of another user's shard encoded again before it is trusted
TOLERANCE = 1e-2  # |cached - fresh| <= TOLERANCE * |fresh| for a spot-checked row
MEMBERS = ("keys.npy", "vectors.npy", "meta.npy")
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_draw = random.SystemRandom()  # which rows are spot-checked cannot be predicted
current_uid = os.getuid


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


def content_hash(keys: np.ndarray, vectors: np.ndarray) -> str:
    """SHA-256 (hex) of a shard's ``keys`` bytes then its float32 ``vectors`` bytes."""
    digest = hashlib.sha256(np.ascontiguousarray(keys).tobytes())
    digest.update(np.ascontiguousarray(vectors, dtype="<f4").tobytes())
    return digest.hexdigest()


class BadShard(Exception):
    """Why a shard is not served (a short reason, grouped in the warning)."""


@dataclass
class _Unchecked:
    """A shard served before its spot check is complete: its owner and rows checked so far."""

    owner: str
    rows: int
    checked: int = 0
    keys: list[bytes] = field(default_factory=list)


class EmbeddingCache:
    """The cached vectors of one model (``model_id``, ``weights_hash``), ``dim`` wide."""

    def __init__(self, model_id: str, weights_hash: str, dim: int, root: Path | None = None):
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("._") or "model"
        base = Path(root) if root is not None else cache_dir("text-embeddings")
        self.folder = base / f"{safe[:60]}-{weights_hash[:16]}"
        self.model_id, self.weights_hash, self.dim = model_id, weights_hash, int(dim)
        self._vectors: dict[bytes, np.ndarray] = {}
        self._origin: dict[bytes, str] = {}  # key -> unchecked shard it was read from
        self._unchecked: dict[str, _Unchecked] = {}
        self._seen: set[str] = set()
        self._write_failed = False
        self._lock = threading.RLock()  # the app calls get() from several threads

    # -- reading --------------------------------------------------------------------------------
    def _refresh(self) -> None:
        """Read the shards written since the last look (by this or another process)."""
        if not self.folder.is_dir():
            return
        ignored: dict[str, list[str]] = {}
        for shard in sorted(self.folder.glob("*.npz")):
            if shard.name in self._seen:
                continue
            self._seen.add(shard.name)
            try:
                keys, vectors, owner = self._read(shard)
            except BadShard as reason:
                ignored.setdefault(str(reason), []).append(shard.name)
                continue
            if owner is not None:
                self._unchecked[shard.name] = _Unchecked(owner, len(keys))
            for key, vector in zip(keys.tolist(), vectors, strict=True):
                if key in self._vectors and key not in self._origin:
                    continue  # a trusted row stays
                self._vectors[key] = vector
                if owner is not None:
                    self._origin[key] = shard.name
                else:
                    self._origin.pop(key, None)
        self._warn(ignored)

    def _read(self, path: Path) -> tuple[np.ndarray, np.ndarray, str | None]:
        """``(keys, vectors, owner)`` of a shard that passes every check of the module
        docstring but the spot check; ``owner`` is None when this user wrote it and nobody
        else can write it, else the name of whoever may have. A :class:`BadShard` says why
        not."""
        limit = MAX_ROWS * (64 + 4 * self.dim) * 1.01 + MAX_META + 3 * NPY_HEADER + (1 << 20)
        with _open_regular(path) as handle:
            info = os.fstat(handle.fileno())
            if info.st_size > limit:
                raise BadShard("larger than any shard")
            try:
                keys, vectors = self._arrays(handle)
            except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError,
                    ValueError, KeyError, UnicodeDecodeError) as error:
                raise BadShard(f"damaged ({type(error).__name__})") from None
        trusted = info.st_uid == current_uid() and not info.st_mode & 0o022
        return keys, vectors, None if trusted else _owner(info.st_uid)

    def _arrays(self, handle) -> tuple[np.ndarray, np.ndarray]:
        with zipfile.ZipFile(handle) as archive:
            members = {item.filename: item for item in archive.infolist()}
            if sorted(members) != sorted(MEMBERS) or len(archive.infolist()) != len(MEMBERS):
                raise BadShard("no manifest (not written by this rudder)" if "meta.npy" not in
                               members else f"members {sorted(members)[:5]}")
            if members["meta.npy"].file_size > MAX_META + NPY_HEADER:
                raise BadShard("its manifest declares a larger size than a manifest has")
            meta = self._manifest(_read_npy(archive, "meta.npy"))
            rows = meta["rows"]
            for name, width in (("keys.npy", 64), ("vectors.npy", 4 * self.dim)):
                size = members[name].file_size
                if not rows * width <= size <= rows * width + NPY_HEADER:
                    raise BadShard(f"{name} declares {size} bytes uncompressed, its {rows} rows "
                                   f"take {rows * width}")
            keys, vectors = _read_npy(archive, "keys.npy"), _read_npy(archive, "vectors.npy")
        if keys.dtype != np.dtype("S64") or keys.shape != (rows,):
            raise BadShard(f"keys {keys.dtype} {keys.shape}, expected S64 ({rows},)")
        if vectors.dtype != np.dtype("<f4") or vectors.shape != (rows, self.dim):
            raise BadShard(f"vectors {vectors.dtype} {vectors.shape}, expected float32 "
                           f"({rows}, {self.dim})")
        if content_hash(keys, vectors) != meta["sha256"]:
            raise BadShard("its content does not match its manifest's sha256")
        digits = keys.view(np.uint8).reshape(rows, 64)
        if not np.isin(digits, _HEX).all() or len(np.unique(keys)) != rows:
            raise BadShard("keys that are not distinct SHA-256 hex digests")
        if not np.isfinite(vectors).all():
            raise BadShard("non-finite vectors")
        return keys, vectors

    def _manifest(self, raw: np.ndarray) -> dict:
        if raw.dtype != np.uint8 or raw.ndim != 1 or raw.size > MAX_META:
            raise BadShard("a manifest that is not UTF-8 JSON bytes")
        meta = json.loads(raw.tobytes().decode("utf-8"))
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise BadShard(f"a manifest of another format (not {FORMAT})")
        mine = {"model_id": self.model_id, "weights_hash": self.weights_hash, "dim": self.dim,
                "dtype": "float32"}
        other = {key: meta.get(key) for key in mine}
        if other != mine:
            raise BadShard("a manifest of another model, weights or dim")
        rows = meta.get("rows")
        if not isinstance(rows, int) or isinstance(rows, bool) or not 1 <= rows <= MAX_ROWS:
            raise BadShard(f"a manifest with rows={rows!r} (1 to {MAX_ROWS})")
        if not isinstance(meta.get("sha256"), str):
            raise BadShard("a manifest without its sha256")
        return meta

    # -- the spot check -------------------------------------------------------------------------
    def _spot_check(self, keys: list[bytes], texts: list[str],
                    encode: Callable[[list[str]], np.ndarray]) -> None:
        """Encode again up to :data:`SPOT_CHECK` texts (in all) of each unchecked shard that
        serves this request, drawn at random among the ones it serves; a shard with a row
        that disagrees is dropped, one whose quota is reached is trusted."""
        served: dict[str, dict[bytes, str]] = {}
        for key, text in zip(keys, texts, strict=True):
            shard = self._origin.get(key)
            if shard is not None:
                served.setdefault(shard, {})[key] = text
        if not served:
            return
        sample: list[tuple[str, bytes, str]] = []
        for shard, rows in served.items():
            state = self._unchecked[shard]
            todo = sorted(set(rows) - set(state.keys))
            count = min(SPOT_CHECK - state.checked, len(todo))
            sample += [(shard, key, rows[key]) for key in _draw.sample(todo, count)]
        if not sample:
            return
        fresh = _checked_vectors(encode([text for _, _, text in sample]), len(sample), self)
        ignored: dict[str, list[str]] = {}
        for (shard, key, _), vector in zip(sample, fresh, strict=True):
            pending = self._unchecked.get(shard)
            if pending is None:
                continue  # already dropped by an earlier row
            distance = float(np.linalg.norm(self._vectors[key] - vector))
            if distance > TOLERANCE * max(float(np.linalg.norm(vector)), 1e-12):
                reason = (f"written by {pending.owner}, its vectors differ from the model's own "
                          "(spot check)")
                ignored.setdefault(reason, []).append(shard)
                self._drop(shard)
                continue
            pending.checked += 1
            pending.keys.append(key)
            if pending.checked >= min(SPOT_CHECK, pending.rows):
                self._trust(shard)
        self._warn(ignored)

    def _drop(self, shard: str) -> None:
        for key in [key for key, origin in self._origin.items() if origin == shard]:
            del self._origin[key], self._vectors[key]
        del self._unchecked[shard]

    def _trust(self, shard: str) -> None:
        for key in [key for key, origin in self._origin.items() if origin == shard]:
            del self._origin[key]
        del self._unchecked[shard]

    def _warn(self, ignored: dict[str, list[str]]) -> None:
        """One warning line for every shard ignored by one look, grouped by reason."""
        if not ignored:
            return
        count = sum(map(len, ignored.values()))
        reasons = "; ".join(f"{reason}: {', '.join(names[:3])}"
                            + (f" and {len(names) - 3} more" if len(names) > 3 else "")
                            for reason, names in ignored.items())
        log.warning("%s: %d embedding-cache shard%s ignored (%s); their texts are encoded again "
                    "and rewritten (`python -m rudder.text.embedding_cache prune` deletes the "
                    "ignored files you own)", self.folder, count, "s" if count > 1 else "",
                    reasons)

    # -- the interface --------------------------------------------------------------------------
    def count_missing(self, texts) -> int:
        """How many distinct ``texts`` are not cached yet: what :meth:`get` would encode
        (for the progress report of a pass)."""
        with self._lock:
            self._refresh()
            return len({key for key in map(text_key, texts) if key not in self._vectors})

    def get(self, texts: list[str], encode: Callable[[list[str]], np.ndarray],
            chunk: int = 2048) -> np.ndarray:
        """Vectors ``(len(texts), dim)`` of ``texts``: cached ones read, the others encoded
        with ``encode`` (list of str -> (n, dim) array) ``chunk`` distinct texts at a time,
        each chunk written as a shard before the next starts."""
        if not 1 <= chunk <= MAX_ROWS:
            raise ValueError(f"chunk must be from 1 to {MAX_ROWS}, got {chunk}")
        texts = list(texts)
        keys = [text_key(t) for t in texts]
        with self._lock:
            self._refresh()
            self._spot_check(keys, texts, encode)
            return self._vectors_of(keys, texts, encode, chunk)

    def _vectors_of(self, keys: list[bytes], texts: list[str],
                    encode: Callable[[list[str]], np.ndarray], chunk: int) -> np.ndarray:
        missing: dict[bytes, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in self._vectors:
                missing.setdefault(key, text)
        todo = list(missing.items())
        for start in range(0, len(todo), chunk):
            part = todo[start : start + chunk]
            vectors = _checked_vectors(encode([text for _, text in part]), len(part), self)
            shard_keys = np.array([key for key, _ in part], dtype="S64")
            self._write(shard_keys, vectors)
            for key, vector in zip(shard_keys.tolist(), vectors, strict=True):
                self._vectors[key] = vector
                self._origin.pop(key, None)
        if not keys:
            return np.zeros((0, self.dim), np.float32)
        return np.stack([self._vectors[key] for key in keys])

    def _write(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        """Write one shard (name: the hash of its keys); a cache that cannot be written is
        said once and the vectors are used without it."""
        name = hashlib.sha256(keys.tobytes()).hexdigest()[:24] + ".npz"
        meta = {"format": FORMAT, "model_id": self.model_id, "weights_hash": self.weights_hash,
                "dim": self.dim, "dtype": "float32", "rows": len(keys),
                "sha256": content_hash(keys, vectors), "writer": _owner(current_uid())}
        buffer = io.BytesIO()
        np.savez_compressed(buffer, keys=keys, vectors=vectors,
                            meta=np.frombuffer(json.dumps(meta).encode("utf-8"), np.uint8))
        try:
            with replacing(self.folder / name) as tmp, open(tmp, "wb") as handle:
                handle.write(buffer.getbuffer())
                mode = os.fstat(handle.fileno()).st_mode
                os.fchmod(handle.fileno(), stat.S_IMODE(mode) & ~0o022)
        except OSError as error:
            if not self._write_failed:
                log.warning("%s: cannot write the embedding cache (%s); vectors are encoded "
                            "without it", self.folder, error.strerror or error)
            self._write_failed = True
            return
        self._seen.add(name)


def stale_shards(root: Path | None = None) -> list[tuple[Path, str]]:
    """``(path, reason)`` of every ``*.npz`` in the model folders under ``root`` (default
    ``$RUDDER_CACHE/text-embeddings``) that no :class:`EmbeddingCache` would serve: the
    checks of the module docstring but the spot check (which needs the model), with the
    model, weights and dim its manifest names, in the folder those name."""
    base = Path(root) if root is not None else cache_dir("text-embeddings")
    stale = []
    for path in sorted(base.glob("*/*.npz")):
        try:
            model_id, weights_hash, dim = _named_model(path)
            reader = EmbeddingCache(model_id, weights_hash, dim, base)
            if reader.folder != path.parent:
                raise BadShard(f"a shard of {model_id} in another model's folder")
            reader._read(path)
        except BadShard as reason:
            stale.append((path, str(reason)))
    return stale


def _named_model(path: Path) -> tuple[str, str, int]:
    """The model id, weights hash and dim a shard's manifest names, read from its
    ``meta.npy`` alone (no link followed, no other member decompressed)."""
    with _open_regular(path) as handle:
        try:
            with zipfile.ZipFile(handle) as archive:
                names = archive.namelist()
                if "meta.npy" not in names:
                    raise BadShard("no manifest (not written by this rudder)")
                if archive.getinfo("meta.npy").file_size > MAX_META + NPY_HEADER:
                    raise BadShard("its manifest declares a larger size than a manifest has")
                raw = _read_npy(archive, "meta.npy")
            meta = json.loads(raw.tobytes().decode("utf-8"))
        except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError,
                ValueError, UnicodeDecodeError) as error:
            raise BadShard(f"damaged ({type(error).__name__})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise BadShard(f"a manifest of another format (not {FORMAT})")
    model_id, weights_hash, dim = meta.get("model_id"), meta.get("weights_hash"), meta.get("dim")
    if not (isinstance(model_id, str) and isinstance(weights_hash, str)
            and isinstance(dim, int) and not isinstance(dim, bool) and dim > 0):
        raise BadShard("a manifest without a model id, weights hash and dim")
    return model_id, weights_hash, dim


def prune(root: Path | None = None, dry_run: bool = False) -> list[tuple[Path, str, str]]:
    """Delete the :func:`stale_shards` the current user owns (``dry_run``: none);
    ``(path, reason, what was done)`` for each stale one."""
    done = []
    for path, reason in stale_shards(root):
        try:
            owner = os.lstat(path).st_uid
        except FileNotFoundError:
            continue  # gone meanwhile (a writer's rename replaced it, or another prune)
        if owner != current_uid():
            done.append((path, reason, f"left: owned by {_owner(owner)}"))
            continue
        if not dry_run:  # a writer's rename may have put a good shard here since: a re-encode
            try:
                path.unlink()
            except FileNotFoundError:
                continue
        done.append((path, reason, "would delete" if dry_run else "deleted"))
    return done


def build_parser():
    from rudder.cli import ArgumentParser, folder

    parser = ArgumentParser(prog="python -m rudder.text.embedding_cache",
                            description="The text-embedding cache.")
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("prune", help="delete the files of the cache no reader "
                                  "would serve (older formats, damaged or foreign files) that "
                                  "you own")
    command.add_argument("--dry-run", action="store_true", help="list them; delete nothing")
    command.add_argument("--root", type=folder, help="the text-embeddings folder (default "
                         "$RUDDER_CACHE/text-embeddings)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """``prune``: print what :func:`prune` did, file by file, then a summary line."""
    args = build_parser().parse_args(argv)
    base = args.root if args.root is not None else cache_dir("text-embeddings")
    done = prune(args.root, args.dry_run)
    for path, reason, action in done:
        print(f"{action}: {path} ({reason})")
    deleted = sum(action in ("deleted", "would delete") for _, _, action in done)
    verb = "would delete" if args.dry_run else "deleted"
    print(f"{base}: {verb} {deleted} file{'s' * (deleted != 1)}; "
          f"{len(done) - deleted} left (another user's)")
    return 0


def _open_regular(path: Path):
    """``path`` opened for reading in binary if it is a regular file: a link is not
    followed, and a FIFO cannot block (opened non-blocking); else :class:`BadShard`."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise BadShard("not a regular file")
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | \
            getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags)
    except OSError as error:
        raise BadShard(f"unreadable ({error.strerror})") from None
    handle = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # replaced since the lstat
        handle.close()
        raise BadShard("not a regular file")
    return handle


def _read_npy(archive: zipfile.ZipFile, name: str) -> np.ndarray:
    with archive.open(name) as member:
        return np.lib.format.read_array(member, allow_pickle=False)


def _checked_vectors(vectors, count: int, cache: EmbeddingCache) -> np.ndarray:
    """``encode``'s output as float32 ``(count, dim)``; wrong shapes and non-finite values
    are a ValueError (never cached)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.shape != (count, cache.dim):
        raise ValueError(f"{cache.model_id}: encoded {count} texts into an array of shape "
                         f"{vectors.shape}, expected ({count}, {cache.dim})")
    if not np.isfinite(vectors).all():
        raise ValueError(f"{cache.model_id}: encoded non-finite vectors for "
                         f"{int((~np.isfinite(vectors).all(axis=1)).sum())} of {count} texts")
    return vectors


def _owner(uid: int) -> str:
    """The user name of ``uid`` (its number when it has none)."""
    if uid == current_uid():
        try:
            return getpass.getuser()
        except (KeyError, OSError):
            pass
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


if __name__ == "__main__":
    raise SystemExit(main())
