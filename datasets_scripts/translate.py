"""``python -m datasets_scripts translate OUT --from mr --to ta te``: add machine translations.

Every human caption in the source language gets one caption per target language, with id
``<caption_id>/mt-<lang>``, the same video, times and kind, and ``machine_translated=True``;
``noun_classes``/``verb_classes`` (language-independent concept ids) are copied, the
language-specific ``nouns``/``verbs`` are left empty for ``heuristics``. Captions translated
before (their id exists) are skipped, so a rerun only does what is missing. All translations
are gathered first (resumable through the cache of :mod:`rudder.translate`); only then are the
caption tables, ``rudder.json`` and the card replaced, all at once (``replace_tables``), under
the dataset's lock (:func:`rudder.atomic.dataset_lock`) and only when no other writer changed
the captions meanwhile.
Offline, it stops at the first batch and writes nothing to the dataset.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rudder.atomic import dataset_lock
from rudder.data.card import Card, card_digests, render_card, row_counts
from rudder.data.layout import SPLITS, DatasetFolder, LayoutError
from rudder.data.layout_writer import files_state, replace_tables
from rudder.languages import SUPPORTED, check_language
from rudder.translate import TranslationUnavailable, default_cache_path, translate_texts

LEMMA_COLUMNS = ("nouns", "verbs")


def translated_id(caption_id: str, lang: str) -> str:
    return f"{caption_id}/mt-{lang}"


def _new_rows(table: pa.Table, src: str, dest: str, existing: set, translations: dict) -> pa.Table:
    """Rows of ``dest`` translations for ``table``'s human ``src`` captions not yet translated."""
    rows = table.filter(
        pc.and_(pc.equal(table["lang"], src), pc.invert(table["machine_translated"]))
    )
    ids = [translated_id(c, dest) for c in rows["caption_id"].to_pylist()]
    keep = pa.array([i not in existing for i in ids])
    rows = rows.filter(keep)
    ids = [i for i in ids if i not in existing]
    columns = {name: rows[name] for name in rows.column_names}
    columns["caption_id"] = pa.array(ids, pa.string())
    columns["lang"] = pa.array([dest] * rows.num_rows, pa.string())
    columns["text"] = pa.array([translations[t] for t in rows["text"].to_pylist()], pa.string())
    columns["machine_translated"] = pa.array([True] * rows.num_rows, pa.bool_())
    for name in LEMMA_COLUMNS:
        if name in columns:
            columns[name] = pa.nulls(rows.num_rows, table.schema.field(name).type)
    return pa.table(columns, schema=table.schema)


def translate_dataset(root, src: str, dests, *, stream=None, **options) -> dict[str, int]:
    """Translate ``root``'s ``src`` captions into each of ``dests``; returns counts per language.

    ``options`` go to :func:`rudder.translate.translate_texts` (cache_path, batch_size,
    texts_per_second, timeout, backend).
    """
    stream = stream or sys.stderr
    folder = DatasetFolder(root)
    check_language(src, "--from")
    dests = [check_language(d, "--to") for d in dests]
    if src in dests:
        raise LayoutError(f"--to {src}: that is the source language; choose other targets")
    missing = folder.missing_splits("captions")
    if missing:
        raise LayoutError(f"{missing[0]} is missing, but the dataset's card lists it: the file "
                          "was deleted or not copied; restore it (or rebuild the dataset)")
    state, tables = files_state(root, "captions"), _caption_tables(root)
    existing = {c for t in tables.values() for c in t["caption_id"].to_pylist()}
    added: dict[str, Any] = {}
    parts: dict[str, list[Any]] = {s: [] for s in tables}
    for dest in dests:
        texts = []
        for table in tables.values():
            human = table.filter(
                pc.and_(pc.equal(table["lang"], src), pc.invert(table["machine_translated"]))
            )
            texts += [
                t
                for c, t in zip(
                    human["caption_id"].to_pylist(), human["text"].to_pylist(), strict=True
                )
                if translated_id(c, dest) not in existing
            ]
        if not texts:
            print(f"{src} -> {dest}: nothing to translate", file=stream)
            continue
        print(f"{src} -> {dest}: {len(set(texts))} distinct texts", file=stream)
        try:
            translations = translate_texts(
                texts,
                src,
                dest,
                progress=lambda done, total: print(f"  {done}/{total}", file=stream),
                **options,
            )
        except TranslationUnavailable as error:
            cache = options.get("cache_path") or default_cache_path()
            raise TranslationUnavailable(
                f"{error}. The dataset was not changed; finished batches are kept in {cache}, "
                "so a rerun resumes from there"
            ) from error
        for split, table in tables.items():
            rows = _new_rows(table, src, dest, existing, translations)
            parts[split].append(rows)
            added[dest] = added.get(dest, 0) + rows.num_rows
    if added:
        new = {s: pa.concat_tables([tables[s], *p]) for s, p in parts.items() if p}
        engine = (
            type(options["backend"]).__name__ if options.get("backend") else _googletrans_version()
        )
        with dataset_lock(root):
            if files_state(root, "captions") != state:
                raise LayoutError(
                    f"{root}: the captions changed while they were being translated (another "
                    "translate or label run?); nothing was written. Rerun it (translations are "
                    "cached, so that is quick)"
                )
            folder = DatasetFolder(root)
            counts = row_counts(root, folder.meta.experts)
            counts.update({("captions", s): table.num_rows for s, table in new.items()})
            texts = _metadata_texts(Path(root), folder, src, added, engine, counts, stream)
            replace_tables(root, "captions", new, texts)
        print(f"added {_note(src, added)} captions to {root}", file=stream)
    return added


def _caption_tables(root) -> dict[str, pa.Table]:
    return {
        s: pq.read_table(p)
        for s in SPLITS
        if (p := Path(root) / "captions" / f"{s}.parquet").is_file()
    }


def _googletrans_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"googletrans {version('googletrans')}"
    except PackageNotFoundError:
        return "googletrans"


def _note(src, added) -> str:
    return "; ".join(f"{n} {src}->{dest}" for dest, n in added.items())


def _metadata_texts(root: Path, folder: DatasetFolder, src, added, engine, counts, stream):
    """``{"rudder.json": ..., "README.md": ...}`` recording the new languages and the
    translation; ``counts`` are the row counts after it (:func:`rudder.data.card.row_counts`)."""
    meta = folder.meta
    used = set(meta.languages) | set(added)
    meta.languages = [lang for lang in SUPPORTED if lang in used]
    log = meta.extra.setdefault("translations", [])
    log += [{"from": src, "to": dest, "captions": n, "engine": engine} for dest, n in added.items()]
    card_fields = meta.extra.get("card")
    if not card_fields:
        print(
            "note: rudder.json has no card fields (not built by datasets_scripts); README.md "
            "was left as it was",
            file=stream,
        )
        return {"rudder.json": meta.to_json()}
    card = Card(**card_fields)
    card.how_built = (
        f"{card.how_built}\n- Machine translations added ({engine}): {_note(src, added)}."
    )
    meta.extra["card"] = vars(card)
    readme = render_card(meta, card, counts, digests=card_digests(root))
    return {"rudder.json": meta.to_json(), "README.md": readme}
