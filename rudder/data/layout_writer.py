"""Writing dataset folders in the layout of :mod:`rudder.data.layout`.

:class:`DatasetWriter` writes into a hidden staging sibling and renames it into place when
:meth:`DatasetWriter.close` succeeds, so a failed or killed build leaves nothing behind (see
:mod:`rudder.atomic`); :func:`replace_tables` rewrites some splits of one config, all or
nothing, also across a kill (:mod:`rudder.data.update_journal`). Every rewrite refreshes the
card's data digests so ``datasets.load_dataset`` does not serve a stale cache (see
:mod:`rudder.data.card`).
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rudder.atomic import (
    remove,
    staging_path,
    swap_into_place,
    sweep,
    terminate_cleanly,
)
from rudder.data.card import SPLITS, Card, config_path, refresh_digests, render_card, row_counts
from rudder.data.layout import (
    CAPTIONS_SCHEMA,
    RELATIONS_SCHEMA,
    VIDEOS_SCHEMA,
    DatasetMeta,
    ExpertInfo,
    LayoutError,
)
from rudder.data.update_journal import update_files
from rudder.labels import PairLabel
from rudder.languages import SUPPORTED, check_language


class DatasetWriter:
    """Write a dataset folder atomically, one expert at a time.

    Use as a context manager; on an exception, or SIGTERM inside the block, the staging
    folder is removed and ``out_dir`` is left as it was; staging left by a killed earlier
    writer of ``out_dir`` is cleaned first. ``overwrite=False`` refuses an existing ``out_dir``.
    """

    def __init__(self, out_dir, meta: DatasetMeta, card: Card, overwrite: bool = False):
        self.out_dir = Path(out_dir)
        sweep(self.out_dir)
        if self.out_dir.exists() and not overwrite:
            raise LayoutError(f"{self.out_dir} already exists; pass overwrite=True (--overwrite)")
        self.meta, self.card = meta, card
        self.out_dir.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = staging_path(self.out_dir, "staging")
        self.tmp.mkdir()
        self.video_split: dict[str, str] = {}
        self._signals = ExitStack()
        self.caption_split: dict[str, str] = {}

    def __enter__(self):
        self._signals.enter_context(terminate_cleanly())
        return self

    def __exit__(self, exc_type, exc, tb):
        with self._signals:
            try:
                if exc_type is None:
                    self.close()
            finally:
                remove(self.tmp)  # gone after a successful close; the staging after a failure
        return False

    def _write_split_tables(self, folder: str, table: pa.Table, split_column) -> None:
        (self.tmp / folder).mkdir(parents=True, exist_ok=True)
        splits = np.asarray(split_column, dtype=object)
        for split in SPLITS:
            part = table.filter(pa.array(splits == split))
            pq.write_table(part, self.tmp / folder / f"{split}.parquet")

    def write_videos(self, videos: pa.Table) -> None:
        """Write the ``videos`` config; its ``split`` column decides every other split."""
        videos = videos.cast(VIDEOS_SCHEMA) if videos.schema != VIDEOS_SCHEMA else videos
        ids = videos.column("video_id").to_pylist()
        splits = videos.column("split").to_pylist()
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise LayoutError(f"videos: duplicate video_id {dup!r}")
        bad = sorted({s for s in splits if s not in SPLITS})
        if bad:
            raise LayoutError(f"videos: unknown split(s) {bad}; use {list(SPLITS)}")
        for experts in videos.column("experts").to_pylist():
            for expert in experts:
                if expert not in self.meta.experts:
                    raise LayoutError(f"videos: expert {expert!r} is not declared in the metadata")
        self.video_split = dict(zip(ids, splits, strict=True))
        self._write_split_tables("videos", videos, splits)

    def _splits_of(self, video_ids, what: str) -> list[str]:
        if not self.video_split:
            raise LayoutError("write_videos must be called before " + what)
        try:
            return [self.video_split[v] for v in video_ids]
        except KeyError as error:
            raise LayoutError(f"{what}: unknown video_id {error.args[0]!r}") from None

    def write_captions(self, captions: pa.Table) -> None:
        """Write the ``captions`` config (base columns, plus the noun/verb columns when present)."""
        missing = [c for c in CAPTIONS_SCHEMA.names if c not in captions.column_names]
        if missing:
            raise LayoutError(f"captions: missing column(s) {missing}")
        ids = captions.column("caption_id").to_pylist()
        if len(set(ids)) != len(ids):
            raise LayoutError("captions: caption_id values must be unique")
        for i, lang in enumerate(captions.column("lang").to_pylist()):
            if lang not in SUPPORTED:
                check_language(lang, where=f"captions row {i} (caption_id {ids[i]!r})")
        splits = self._splits_of(captions.column("video_id").to_pylist(), "captions")
        self._write_split_tables("captions", captions, splits)
        self.caption_split = dict(zip(ids, splits, strict=True))

    def write_text_features(self, dim: int, batches) -> None:
        """Stream ``(caption_ids, arrays)`` batches into the ``text_features`` config: one
        ``(n_i, dim)`` float array of token vectors per caption (captions written first)."""
        if not self.caption_split:
            raise LayoutError("write_captions must be called before write_text_features")
        info = ExpertInfo(dim, variable_length=True)

        def splits_of(caption_ids):
            try:
                return [self.caption_split[c] for c in caption_ids]
            except KeyError as error:
                raise LayoutError(f"text_features: unknown caption_id {error.args[0]!r}") from None

        self._stream_by_split(
            self.tmp / "text_features",
            "caption_id",
            info.arrow_type,
            batches,
            splits_of,
            lambda ids, arrays, kind: _feature_column("text_features", ids, arrays, info, kind),
        )
        self.meta.text_features_dim = dim

    def write_expert(self, expert: str, batches) -> None:
        """Stream ``(video_ids, features)`` batches of one expert into its config.

        ``features`` is a float array ``(n, D)`` for fixed-size experts, or a list of
        ``(n_i, D)`` arrays for variable-length ones. Rows are checked for dimension and
        finiteness; only one batch is held in memory at a time.
        """
        info = self.meta.experts.get(expert)
        if info is None:
            raise LayoutError(f"expert {expert!r} is not declared in the metadata")
        self._stream_by_split(
            self.tmp / "features" / expert,
            "video_id",
            info.arrow_type,
            batches,
            lambda ids: self._splits_of(ids, f"features.{expert}"),
            lambda ids, features, kind: _feature_column(expert, ids, features, info, kind),
        )

    @staticmethod
    def _stream_by_split(
        folder: Path, key: str, feature_type, batches, splits_of, column_of
    ) -> None:
        """Write ``(keys, values)`` batches as ``<folder>/<split>.parquet`` files with columns
        ``key`` and ``feature`` (``column_of(keys, values, feature_type)``), each row to the
        split ``splits_of(keys)`` names; one batch in memory at a time."""
        schema = pa.schema([(key, pa.string()), ("feature", feature_type)])
        folder.mkdir(parents=True, exist_ok=True)
        # Dictionary-encoding float vectors is slow and useless; only ids may repeat.
        writers = {
            s: pq.ParquetWriter(folder / f"{s}.parquet", schema, use_dictionary=[key])
            for s in SPLITS
        }
        try:
            for keys, values in batches:
                keys = list(keys)
                splits = np.asarray(splits_of(keys), dtype=object)
                table = pa.table(
                    {
                        key: pa.array(keys, pa.string()),
                        "feature": column_of(keys, values, feature_type),
                    }
                )
                for split in SPLITS:
                    part = table.filter(pa.array(splits == split))
                    if part.num_rows:
                        writers[split].write_table(part)
        finally:
            for writer in writers.values():
                writer.close()

    def write_relations(self, relations: pa.Table) -> None:
        """Write the optional ``relations`` config (pair labels 0..3,
        :class:`rudder.labels.PairLabel`)."""
        relations = relations.select(RELATIONS_SCHEMA.names).cast(RELATIONS_SCHEMA)
        labels = relations.column("label").to_numpy()
        if labels.size and (labels.min() < min(PairLabel) or labels.max() > max(PairLabel)):
            raise LayoutError(
                "relations: label must be 0 negative, 1 partial, 2 positive, 3 description"
            )
        (self.tmp / "relations").mkdir(exist_ok=True)
        pq.write_table(relations, self.tmp / "relations" / "all.parquet")

    def close(self) -> None:
        """Write metadata and card, then move the folder into place; files with no rows are
        left out (a config with no rows, e.g. relations, is then not in the card)."""
        if not self.video_split:
            raise LayoutError("a dataset needs a videos config")
        for expert in self.meta.experts:
            if not (self.tmp / "features" / expert).exists():
                raise LayoutError(f"expert {expert!r} is declared but no features were written")
        counts = row_counts(self.tmp, self.meta.experts)
        for (config, split), rows in counts.items():
            if rows == 0:
                (self.tmp / config_path(config, split)).unlink()
        (self.tmp / "rudder.json").write_text(self.meta.to_json(), encoding="utf-8")
        card = render_card(self.meta, self.card, counts)
        (self.tmp / "README.md").write_text(card, encoding="utf-8")
        refresh_digests(self.tmp)
        swap_into_place(self.tmp, self.out_dir)


def _feature_column(expert, video_ids, features, info: ExpertInfo, feature_type) -> pa.Array:
    """Validate one batch of features and turn it into an Arrow column."""
    if info.variable_length:
        arrays = [np.asarray(f, dtype=np.float32) for f in features]
        for vid, arr in zip(video_ids, arrays, strict=False):
            _check_feature(expert, vid, arr, info.dim, ndim=2)
        flat = (
            np.concatenate([a.reshape(-1) for a in arrays]) if arrays else np.zeros(0, np.float32)
        )
        rows = pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), info.dim)
        offsets = np.concatenate([[0], np.cumsum([len(a) for a in arrays])]).astype(np.int32)
        return pa.ListArray.from_arrays(pa.array(offsets), rows).cast(feature_type)
    matrix = np.asarray(features, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != len(video_ids):
        raise LayoutError(
            f"features.{expert}: expected a ({len(video_ids)}, {info.dim}) batch, "
            f"got shape {matrix.shape}"
        )
    for vid, row in zip(video_ids, matrix, strict=True):
        _check_feature(expert, vid, row, info.dim, ndim=1)
    return pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1), pa.float32()), info.dim)


def _check_feature(expert: str, video_id: str, array: np.ndarray, dim: int, ndim: int) -> None:
    if array.ndim != ndim or array.shape[-1] != dim or (ndim == 2 and array.shape[0] == 0):
        want = f"({dim},)" if ndim == 1 else f"(n>0, {dim})"
        raise LayoutError(
            f"features.{expert}: video {video_id!r} has shape {array.shape}, expected {want}"
        )
    if not np.isfinite(array).all():
        raise LayoutError(
            f"features.{expert}: video {video_id!r} has NaN or inf values; "
            "drop the video from this expert (it is then marked unavailable) or fix the file"
        )


def files_state(root, folder: str) -> tuple:
    """What identifies the current ``<root>/<folder>/*.parquet`` files: name, inode, size and
    modification time of each. :func:`replace_tables` renames new files in, so any rewrite
    changes it; read before a long computation and compared under
    :func:`rudder.atomic.dataset_lock` before writing, it tells whether another writer came
    in between (comparing the tables' values would see NaN != NaN)."""
    files = sorted((Path(root) / folder).glob("*.parquet"))
    return tuple((p.name, s.st_ino, s.st_size, s.st_mtime_ns) for p in files for s in [p.stat()])


def replace_tables(
    root, folder: str, tables: dict[str, pa.Table], texts: dict[str, str] | None = None,
    configs: dict[str, list] | None = None,
) -> None:
    """Replace ``<root>/<folder>/<split>.parquet`` for the given splits, and the text files
    ``texts`` (``{relative path: content}``, e.g. ``rudder.json`` and ``README.md``), all or
    nothing, and refresh the card's data digests; ``configs`` (``{name: data_files}``) are
    added to the card when missing.

    Goes through :func:`rudder.data.update_journal.update_files`: every new file is staged,
    one journal write commits them, and an update killed after its commit is completed by
    the next reader or writer, so no reader sees some splits new and some old.
    """
    root = Path(root)
    for split in tables:  # staging that older rudder versions left beside the files
        sweep(root / folder / f"{split}.parquet")
    writers = {
        f"{folder}/{split}.parquet": (lambda path, t=table: pq.write_table(t, path))
        for split, table in tables.items()
    }
    for relative, text in (texts or {}).items():
        writers[relative] = lambda path, t=text: path.write_text(t, encoding="utf-8")
    update_files(root, writers, configs, digests=(folder,))
