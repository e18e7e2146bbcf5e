"""``python -m heuristics retrain``: train PO(M) on the labels settled in the app's database.

1. Read every annotator's current label of the dataset from the app's SQLite file (opened
   read-only, so a running app keeps writing): its view ``current_labels`` (``dataset,
   annotator, caption_id_a, caption_id_b, label, time``; docs/app.md).
2. Settle one label per ordered pair (:func:`rudder.evaluation.agreement.settle`): an adjudicator's
   label, else the one label, the agreed label or the majority; pairs whose votes tie are
   left out and counted.
3. Relations: the settled labels replace the dataset's own relations rows of the same
   ordered pair, the dataset's other rows are kept (``--only-app-labels`` drops them).
4. Train PO(M) (``loss po`` with ``supervision.manual_relations``, ``relation_batches`` with
   ``relation_pinning: drawn`` and ``description_labels``; ``data.caption_sampling:
   random``, which the relation batches need) from the base run's config (``--base-run``,
   else the defaults), reading the relations from ``relations.parquet`` in the run folder
   (``supervision.relations_file``).
   The run is written in a hidden staging folder beside ``--out`` and renamed into place
   once its test pass is done, so a killed retrain leaves no half run that the app or
   ``rudder.evaluate`` could pick up.

The run keeps ``relations.parquet`` and ``manual_labels.json``: how many manual labels it
used, how they were settled, which annotators gave them and from when to when.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rudder.atomic import STAGED, staged_folder, swap_into_place, sweep
from rudder.data.layout import RELATIONS_SCHEMA, SPLITS, DatasetFolder
from rudder.errors import RudderError
from rudder.evaluation.agreement import settle

SETTLED = "settled"  # the annotator name of settled app labels in relations.parquet
RECORD = "manual_labels.json"
RELATIONS = "relations.parquet"
PO_MANUAL = (
    "loss.name=po",
    "supervision.manual_relations=true",
    "supervision.relation_batches=true",
    "supervision.relation_pinning=drawn",
    "supervision.description_labels=true",
    "supervision.positive_sampling=own",
    "data.caption_sampling=random",
    f"supervision.relations_file={RELATIONS}",
)


class RetrainError(RudderError):
    """An annotation database, dataset or base run the retrain cannot use."""


def read_app_labels(db_path, dataset: str | None) -> list[dict]:
    """Every annotator's current label of ``dataset`` in the app's database ``db_path``
    (None: only check that the file is one; returns [])."""
    path = Path(db_path)
    if not path.is_file():
        raise RetrainError(f"--from-labels {path}: no such file (the app's --db, default "
                           "annotations.sqlite)")
    try:
        with sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True, timeout=30) as db:
            cursor = db.execute(
                "SELECT dataset, annotator, caption_id_a, caption_id_b, label, time"
                " FROM current_labels WHERE dataset = ? ORDER BY id", (dataset,))
            names = [column[0] for column in cursor.description]
            rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    except sqlite3.Error as error:
        raise RetrainError(f"--from-labels {path}: not an annotation database of the app "
                           f"({error})") from None
    return rows


def training_captions(folder: DatasetFolder) -> tuple[set, set]:
    """(every caption id, the training split's caption ids) of ``folder``."""
    every, train = set(), set()
    for split in SPLITS:
        if (folder.root / "captions" / f"{split}.parquet").is_file():
            ids = folder.captions(split, columns=["caption_id"]).column("caption_id").to_pylist()
            every.update(ids)
            if split == "train":
                train.update(ids)
    return every, train


def settled_relations(records: list[dict], adjudicators, folder: DatasetFolder,
                      only_app_labels: bool = False) -> tuple[pa.Table, dict]:
    """The relations table to train on and the record of the labels in it (module
    docstring); no settled label is an error that says why."""
    settled, unsettled = settle(records, adjudicators)
    dataset = folder.meta.name
    if not settled:
        why = (f"{len(records)} labels, {len(unsettled)} pair(s) unsettled (their votes tie: "
               "a third annotator or an adjudicator settles them)" if records
               else "no labels at all")
        raise RetrainError(f"no settled labels of dataset {dataset!r} to train on ({why})")
    known, train = training_captions(folder)
    unknown = [r for r in settled if r["caption_id_a"] not in known
               or r["caption_id_b"] not in known]
    if unknown:
        first = unknown[0]
        raise RetrainError(
            f"{len(unknown)} settled label(s) name captions that {folder.root} lacks (e.g. "
            f"{first['caption_id_a']} / {first['caption_id_b']}): are the labels of another "
            "dataset of the same name? Pass the dataset they were made on")
    app = pa.table({
        "caption_id_a": pa.array([r["caption_id_a"] for r in settled], pa.string()),
        "caption_id_b": pa.array([r["caption_id_b"] for r in settled], pa.string()),
        "label": pa.array([r["label"] for r in settled], pa.int8()),
        "annotator": pa.array([SETTLED] * len(settled), pa.string()),
    })
    kept = 0
    table = app
    own = None if only_app_labels else folder.relations()
    if own is not None and own.num_rows:
        own = own.select(RELATIONS_SCHEMA.names).cast(RELATIONS_SCHEMA)
        pairs = set(zip(app.column("caption_id_a").to_pylist(),
                        app.column("caption_id_b").to_pylist(), strict=True))
        keep = [pair not in pairs for pair in zip(own.column("caption_id_a").to_pylist(),
                                                  own.column("caption_id_b").to_pylist(),
                                                  strict=True)]
        own = own.filter(pa.array(keep, pa.bool_()))
        kept = own.num_rows
        table = pa.concat_tables([own, app])
    times = sorted(r["time"] for r in settled)
    how = {name: sum(r["how"] == name for r in settled)
           for name in ("single", "agreed", "majority", "adjudicated")}
    record = {
        "dataset": dataset,
        "labels": len(settled),
        "settled": how,
        "unsettled": len(unsettled),
        "label_rows": len(records),
        "annotators": sorted({r["annotator"] for r in records}),
        "adjudicators": sorted(set(adjudicators)),
        "first_label": times[0],
        "last_label": times[-1],
        "in_training_split": int(sum(r["caption_id_a"] in train and r["caption_id_b"] in train
                                     for r in settled)),
        "dataset_relations_kept": kept,
        "relations": table.num_rows,
    }
    return table, record


def retrain_config(dataset: str, base_run=None, epochs: int | None = None,
                   seed: int | None = None, overrides=()):
    """The PO(M) config: the base run's saved config (else the defaults) on ``dataset`` with
    :data:`PO_MANUAL`, then ``epochs``, ``seed`` and the ``--set`` ``overrides``."""
    from rudder.config import apply_override, from_dict
    from rudder.runs.layout import config_file, read_config

    data: dict = {}
    if base_run is not None:
        base = Path(base_run)
        if not config_file(base).is_file():
            raise RetrainError(f"--base-run {base}: not a run folder (no {config_file(base)})")
        data = read_config(base)
        for key in ("text_input_dim", "word_dim"):  # filled in by the run from its data
            (data.get("model") or {}).pop(key, None)
        if (data.get("loss") or {}).get("name") != "po":
            data["loss"] = {"name": "po"}  # another loss: PO's parameters start from defaults
    name = str(data.get("name") or "ce")
    settings = [f"data.dataset={json.dumps(dataset)}", f"name={name}-retrained", *PO_MANUAL]
    if epochs is not None:
        settings.append(f"epochs={epochs}")
    if seed is not None:
        settings.append(f"seed={seed}")
    for assignment in (*settings, *overrides):
        apply_override(data, assignment)
    return from_dict(data)


def sweep_dead_staging(runs_dir: Path) -> None:
    """Remove the staging folders that killed retrains left in ``runs_dir``."""
    if runs_dir.is_dir():
        for path in runs_dir.iterdir():
            match = STAGED.match(path.name)
            if match:
                sweep(runs_dir / match["target"])


def retrain(dataset: str, db_path, out, base_run=None, db_dataset: str | None = None,
            adjudicators=(), only_app_labels: bool = False, epochs: int | None = None,
            seed: int | None = None, overrides=(), dry_run: bool = False) -> dict:
    """Settle the app's labels of ``dataset`` and train PO(M) on them into ``out`` (module
    docstring); returns the record written as ``manual_labels.json`` (with ``run`` and
    ``test``, the run's test metrics)."""
    from rudder import train
    from rudder.data.lookup import resolve_dataset

    read_app_labels(db_path, None)  # a wrong file is named before the dataset is looked up
    folder = resolve_dataset(dataset)
    name = db_dataset or folder.meta.name
    records = read_app_labels(db_path, name)
    table, record = settled_relations(records, adjudicators, folder, only_app_labels)
    record["source"] = str(Path(db_path).resolve())
    record["read_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    config = retrain_config(dataset, base_run, epochs, seed, overrides)
    if dry_run:
        return record
    out = Path(out)
    if out.exists():
        raise RetrainError(f"--out {out} exists; name a new run folder")
    sweep_dead_staging(out.parent)
    with staged_folder(out) as stage:
        pq.write_table(table, stage / RELATIONS)
        result = train.run(config, stage / "run", files={RELATIONS: stage / RELATIONS})
        record["run"] = str(out)
        record["test"] = result.get("test", {})
        (stage / "run" / RECORD).write_text(json.dumps(record, indent=2, default=_plain) + "\n",
                                            encoding="utf-8")
        swap_into_place(stage / "run", out)
    return record


def _plain(value):
    """JSON for numpy numbers in the test metrics."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def read_record(run_dir) -> dict | None:
    """The ``manual_labels.json`` of a retrained run, None for another run."""
    path = Path(run_dir) / RECORD
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
