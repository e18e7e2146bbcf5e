"""The text-embedding cache on shared storage: what it serves, what it ignores (one warning
line, texts encoded again, the bad file replaced), and concurrent writers."""

import hashlib
import io
import json
import multiprocessing
import os
import re
import threading
import tracemalloc
import zipfile

import numpy as np
import pytest

from rudder.text import embedding_cache
from rudder.text.embedding_cache import EmbeddingCache, content_hash, text_key

MODEL, WEIGHTS, DIM = "fake/model", "ab" * 32, 4
TEXTS = [f"caption {i}: cut a strip of paper" for i in range(6)]


def encode(texts):
    """Vectors that are a function of the text (a stand-in model), unit length."""
    rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:DIM], np.uint8) + 1.0
            for t in texts]
    out = np.array(rows, np.float32).reshape(len(texts), DIM)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        return encode(texts)


@pytest.fixture
def warnings(monkeypatch):
    said = []
    monkeypatch.setattr(embedding_cache.log, "warning", lambda *a: said.append(a[0] % a[1:]))
    return said


def cache(tmp_path):
    return EmbeddingCache(MODEL, WEIGHTS, DIM, tmp_path)


def written(tmp_path):
    """One shard of TEXTS written by rudder: (path, keys, vectors)."""
    first = cache(tmp_path)
    first.get(TEXTS, encode)
    (path,) = first.folder.glob("*.npz")
    with np.load(path) as data:
        return path, data["keys"], data["vectors"]


def forge(path, keys, vectors, mode=0o664, **meta):
    """A shard with a manifest that matches its content (as anyone who can write the
    folder can make), group-writable by default (so not only its owner may have written it)."""
    manifest = {"format": embedding_cache.FORMAT, "model_id": MODEL, "weights_hash": WEIGHTS,
                "dim": DIM, "dtype": "float32", "rows": len(keys),
                "sha256": content_hash(keys, vectors), "writer": "mallory", **meta}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, keys=keys, vectors=vectors,
                        meta=np.frombuffer(json.dumps(manifest).encode(), np.uint8))
    path.write_bytes(buffer.getvalue())
    path.chmod(mode)


def served_again(tmp_path, warnings, reason, reader_uid=None):
    """A fresh cache (another process; run as ``reader_uid`` when given) ignores the planted
    shard with one warning naming ``reason``, re-encodes the texts, returns the true vectors
    and replaces the file."""
    recorder = Recorder()
    fresh = cache(tmp_path)
    with pytest.MonkeyPatch.context() as patch:
        if reader_uid is not None:
            patch.setattr(embedding_cache, "current_uid", lambda: reader_uid)
        out = fresh.get(TEXTS, recorder)
    np.testing.assert_array_equal(out, encode(TEXTS))
    assert len(warnings) == 1 and reason in warnings[0], warnings
    assert "their texts are encoded again" in warnings[0] and "\n" not in warnings[0]
    assert recorder.calls[-1] == TEXTS  # every text of the ignored shard encoded again
    # the file at that name is rudder's again: a third reader needs no encoding, no warning
    warnings.clear()
    again = cache(tmp_path).get(TEXTS, lambda t: pytest.fail(f"re-encoded {t}"))
    np.testing.assert_array_equal(again, encode(TEXTS))
    assert warnings == []


def test_own_shards_are_served_without_encoding_and_other_users_are_spot_checked(
        tmp_path, warnings, monkeypatch):
    path, _, _ = written(tmp_path)
    assert not path.stat().st_mode & 0o022  # only its owner can change it
    out = cache(tmp_path).get(TEXTS, lambda t: pytest.fail(f"re-encoded {t}"))
    np.testing.assert_array_equal(out, encode(TEXTS))
    # the same shard seen as another user's: a few texts are encoded again, once
    monkeypatch.setattr(embedding_cache, "current_uid", lambda: os.getuid() + 1)
    monkeypatch.setattr(embedding_cache, "SPOT_CHECK", 3)
    recorder = Recorder()
    other = cache(tmp_path)
    np.testing.assert_array_equal(other.get(TEXTS[:2], recorder), encode(TEXTS[:2]))
    np.testing.assert_array_equal(other.get(TEXTS, recorder), encode(TEXTS))
    np.testing.assert_array_equal(other.get(TEXTS, recorder), encode(TEXTS))
    assert [len(call) for call in recorder.calls] == [2, 1]  # 3 rows checked, then trusted
    assert warnings == []


@pytest.mark.parametrize("who", ["group-writable", "another user"])
def test_permuted_rows_with_a_matching_manifest_are_caught_by_the_spot_check(
        tmp_path, warnings, who):
    """The case of a planted shard that changed rudder.evaluate's results: same keys, rows
    permuted, a manifest whose checksum matches; read by a user who did not write it."""
    path, keys, vectors = written(tmp_path)
    forge(path, keys, vectors[::-1].copy(), mode=0o644 if who == "another user" else 0o664)
    served_again(tmp_path, warnings, "its vectors differ from the model's own (spot check)",
                 reader_uid=os.getuid() + 1 if who == "another user" else None)


def test_a_few_planted_rows_are_caught_when_the_check_covers_them(tmp_path, warnings):
    path, keys, vectors = written(tmp_path)
    planted = vectors.copy()
    planted[4] = planted[0]  # one caption answered as another
    forge(path, keys, planted)
    served_again(tmp_path, warnings, "spot check")


def test_nan_rows_are_refused_whoever_wrote_them(tmp_path, warnings):
    path, keys, vectors = written(tmp_path)
    bad = vectors.copy()
    bad[2] = np.nan
    forge(path, keys, bad, mode=0o644)  # even a shard of one's own
    served_again(tmp_path, warnings, "non-finite vectors")


def test_a_fifo_named_npz_does_not_hang(tmp_path, warnings):
    folder = cache(tmp_path).folder
    folder.mkdir(parents=True)
    fifo = folder / "0000.npz"
    os.mkfifo(fifo)
    result = {}
    reader = threading.Thread(target=lambda: result.update(out=cache(tmp_path).get(
        TEXTS, encode)), daemon=True)
    reader.start()
    reader.join(timeout=20)
    try:
        assert not reader.is_alive(), "reading the cache hung on a FIFO"
    finally:  # release a reader blocked in open() (the old behaviour)
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    np.testing.assert_array_equal(result["out"], encode(TEXTS))
    assert len(warnings) == 1 and "not a regular file: 0000.npz" in warnings[0]


def test_a_link_named_npz_is_not_followed(tmp_path, warnings):
    path, _, _ = written(tmp_path)
    outside = tmp_path / "elsewhere.npz"
    path.rename(outside)
    path.symlink_to(outside)
    served_again(tmp_path, warnings, "not a regular file")


def test_a_small_file_declaring_a_huge_size_is_refused_before_decompressing(
        tmp_path, warnings):
    """The manifest says 6 rows; vectors.npy inflates to 64 MB from ~64 KB on disk."""
    path, keys, vectors = written(tmp_path)
    manifest = {"format": embedding_cache.FORMAT, "model_id": MODEL, "weights_hash": WEIGHTS,
                "dim": DIM, "dtype": "float32", "rows": len(keys),
                "sha256": content_hash(keys, vectors)}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, array in (("keys.npy", keys), ("meta.npy", np.frombuffer(
                json.dumps(manifest).encode(), np.uint8))):
            with archive.open(name, "w") as member:
                np.lib.format.write_array(member, array)
        with archive.open("vectors.npy", "w") as member:
            np.lib.format.write_array_header_1_0(member, {
                "descr": "<f4", "fortran_order": False, "shape": (1 << 24, DIM // 4)})
            for _ in range(64):
                member.write(bytes(1 << 20))
    path.chmod(0o644)
    assert path.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        out = cache(tmp_path).get(TEXTS, encode)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(out, encode(TEXTS))
    assert peak < 16 << 20, f"{peak / 2**20:.0f} MiB allocated"
    assert len(warnings) == 1
    assert re.search(r"vectors.npy declares \d{8} bytes uncompressed, its 6 rows take 96",
                     warnings[0])


@pytest.mark.parametrize("damage", ["truncated", "flipped", "no manifest", "other weights",
                                    "extra member", "bad keys"])
def test_damaged_or_foreign_files_are_ignored(tmp_path, warnings, damage):
    path, keys, vectors = written(tmp_path)
    data = path.read_bytes()
    reason = "damaged"
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flipped":  # a byte of the compressed vectors changed
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo("vectors.npy")
        at = info.header_offset + 30 + len(info.filename) + info.compress_size // 2
        path.write_bytes(data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:])
    elif damage == "no manifest":  # what an older rudder, or anyone, writes
        np.savez_compressed(path, keys=keys, vectors=vectors[::-1])
        reason = "no manifest (not written by this rudder)"
    elif damage == "other weights":
        forge(path, keys, vectors, mode=0o644, weights_hash="cd" * 32)
        reason = "a manifest of another model, weights or dim"
    elif damage == "extra member":
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr("payload.npy", b"x")
        reason = "members"
    else:
        bad = keys.copy()
        bad[1] = bad[0]
        forge(path, bad, vectors, mode=0o644)
        reason = "keys that are not distinct SHA-256 hex digests"
    served_again(tmp_path, warnings, reason)


def test_one_warning_line_for_many_ignored_files(tmp_path, warnings):
    folder = cache(tmp_path).folder
    folder.mkdir(parents=True)
    for i in range(5):
        (folder / f"junk{i}.npz").write_bytes(b"junk")
    cache(tmp_path).get(TEXTS, encode)
    assert len(warnings) == 1 and "5 embedding-cache shards ignored" in warnings[0]
    assert "and 2 more" in warnings[0]


def test_non_finite_encodings_are_an_error_and_never_cached(tmp_path):
    broken = cache(tmp_path)
    with pytest.raises(ValueError, match="non-finite vectors for 1 of 6 texts"):
        broken.get(TEXTS, lambda t: np.where(np.arange(len(t))[:, None] == 3, np.nan,
                                             encode(t)))
    assert not list(broken.folder.glob("*.npz"))


def test_a_cache_that_cannot_be_written_is_said_once(tmp_path, warnings):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    unwritable = EmbeddingCache(MODEL, WEIGHTS, DIM, blocker)
    np.testing.assert_array_equal(unwritable.get(TEXTS[:2], encode), encode(TEXTS[:2]))
    np.testing.assert_array_equal(unwritable.get(TEXTS, encode), encode(TEXTS))
    assert len(warnings) == 1 and "cannot write the embedding cache" in warnings[0]


def write_repeatedly(root, times=40):
    """Rewrite the shard of TEXTS ``times`` times (a writer process)."""
    writer = EmbeddingCache(MODEL, WEIGHTS, DIM, root)
    keys = np.array([text_key(t) for t in TEXTS], dtype="S64")
    for _ in range(times):
        writer._write(keys, encode(TEXTS))


def test_two_processes_writing_the_same_entry_leave_one_whole_shard(tmp_path, warnings):
    """Two writers replace the same shard 40 times each while this process reads it: every
    read sees a whole shard (no warning, nothing encoded), and one valid file is left."""
    root = tmp_path / "shared"
    written(root)
    fork = multiprocessing.get_context("fork")
    writers = [fork.Process(target=write_repeatedly, args=(root,)) for _ in range(2)]
    for writer in writers:
        writer.start()
    reads = 0
    while any(w.is_alive() for w in writers) or reads < 5:
        out = EmbeddingCache(MODEL, WEIGHTS, DIM, root).get(
            TEXTS, lambda t: pytest.fail(f"a reader saw a partial shard and re-encoded {t}"))
        np.testing.assert_array_equal(out, encode(TEXTS))
        reads += 1
    for writer in writers:
        writer.join(timeout=60)
    assert [w.exitcode for w in writers] == [0, 0]
    folder = cache(root).folder
    assert [p.name for p in folder.iterdir()] == [
        hashlib.sha256(np.array([text_key(t) for t in TEXTS], "S64").tobytes()).hexdigest()[:24]
        + ".npz"]  # no temporary file left behind
    assert warnings == []


def test_prune_deletes_the_files_no_reader_serves_and_keeps_the_rest(tmp_path, warnings, capsys):
    good, keys, vectors = written(tmp_path)
    folder = good.parent
    np.savez_compressed(folder / "old.npz", keys=keys, vectors=vectors)  # an older rudder's
    (folder / "junk.npz").write_bytes(b"junk")
    forge(folder / "other-model.npz", keys, vectors, mode=0o644, model_id="other/model")
    target = tmp_path / "elsewhere.npz"
    target.write_bytes(b"not the cache's")
    (folder / "link.npz").symlink_to(target)
    stale = {path.name: reason for path, reason in embedding_cache.stale_shards(tmp_path)}
    assert stale == {"old.npz": "no manifest (not written by this rudder)",
                     "junk.npz": "damaged (BadZipFile)",
                     "other-model.npz": "a shard of other/model in another model's folder",
                     "link.npz": "not a regular file"}  # the link is not followed

    assert embedding_cache.main(["prune", "--dry-run", "--root", str(tmp_path)]) == 0
    assert "would delete 4 files; 0 left" in capsys.readouterr().out
    assert len(list(folder.glob("*.npz"))) == 5  # nothing deleted

    embedding_cache.main(["prune", "--root", str(tmp_path)])
    out = capsys.readouterr().out
    assert f"deleted: {folder / 'old.npz'} (no manifest" in out and "deleted 4 files" in out
    assert [p.name for p in folder.glob("*.npz")] == [good.name]
    assert target.read_bytes() == b"not the cache's"  # the link went, not what it named
    warnings.clear()
    served = cache(tmp_path).get(TEXTS, lambda t: pytest.fail(f"re-encoded {t}"))
    np.testing.assert_array_equal(served, encode(TEXTS))
    assert warnings == []  # nothing left to ignore


def test_prune_leaves_another_users_files(tmp_path, monkeypatch):
    good, _, _ = written(tmp_path)
    (good.parent / "junk.npz").write_bytes(b"junk")
    monkeypatch.setattr(embedding_cache, "current_uid", lambda: os.getuid() + 1)
    done = embedding_cache.prune(tmp_path)
    assert [(path.name, action.split(":")[0]) for path, _, action in done] == [
        ("junk.npz", "left")]
    assert (good.parent / "junk.npz").exists() and good.exists()
