"""The on-disk dataset layout shared by the sample generator, the builders and the loaders.

A dataset is a folder that ``datasets.load_dataset(folder, config)`` loads as the Hub would:

```
README.md                         dataset card; YAML ``configs:`` block lists every config
rudder.json                       metadata: name, version, languages,
                                  experts {name: dim, variable_length}
captions/{train,validation,test}.parquet
videos/{train,validation,test}.parquet
features/<expert>/{train,validation,test}.parquet    config ``features.<expert>``
text_features/{train,validation,test}.parquet         optional config ``text_features``: per-token
                                  vectors of each caption (caption_id, feature (n, D)), e.g. CE's
                                  word2vec/GPT token features
relations/all.parquet             optional config ``relations`` (split ``train``)
```

Splits are by video. Columns follow docs/data.md; ``videos.experts`` lists the experts a video
has, and a features file holds rows only for those videos (availability is never a zero
vector). This module holds the schema (column types, names, metadata) and the reader,
:class:`DatasetFolder`; :mod:`rudder.data.layout_writer` writes and rewrites folders.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rudder.data.card import SPLITS, card_digests, listed_paths
from rudder.data.update_journal import complete_pending
from rudder.errors import RudderError
from rudder.languages import check_language

EXPERT_KINDS = ("scene", "object", "action", "audio", "speech", "ocr", "face", "motion", "rgb")
CAPTION_KINDS = ("caption", "listing", "describing", "narration", "paragraph")

CAPTIONS_SCHEMA = pa.schema(
    [
        ("caption_id", pa.string()),
        ("video_id", pa.string()),
        ("lang", pa.string()),
        ("text", pa.string()),
        ("start", pa.float32()),
        ("end", pa.float32()),
        ("kind", pa.string()),
        ("machine_translated", pa.bool_()),
    ]
)
# The noun/verb columns ``python -m heuristics label`` (or a manual annotation) adds to the
# captions; not pair labels (:mod:`rudder.labels`).
NOUN_VERB_COLUMNS = ("nouns", "verbs", "noun_classes", "verb_classes")
VIDEOS_SCHEMA = pa.schema(
    [
        ("video_id", pa.string()),
        ("duration", pa.float32()),
        ("split", pa.string()),
        ("experts", pa.list_(pa.string())),
    ]
)
RELATIONS_SCHEMA = pa.schema(
    [
        ("caption_id_a", pa.string()),
        ("caption_id_b", pa.string()),
        ("label", pa.int8()),
        ("annotator", pa.string()),
    ]
)


class LayoutError(RudderError):
    """A dataset folder or table that does not follow the layout."""


def parse_expert(name: str) -> tuple[str, str | None]:
    """Split ``'<kind>'`` or ``'<kind>@<lang>'`` into ``(kind, lang)``, validating both."""
    match = re.fullmatch(r"([a-z0-9_]+)(?:@([a-z]+))?", name)
    if not match:
        raise LayoutError(
            f"bad expert name {name!r}: use '<kind>' or '<kind>@<lang>', e.g. 'scene', 'audio@mr'"
        )
    kind, lang = match.groups()
    if lang is not None:
        check_language(lang, where=f"expert name {name!r}")
    return kind, lang


def expert_config(expert: str) -> str:
    """The config name of an expert's features: ``features.<expert>``."""
    parse_expert(expert)
    return f"features.{expert}"


@dataclass
class ExpertInfo:
    """Dimension of an expert's features and whether each video has an (n, D) array."""

    dim: int
    variable_length: bool = False

    @property
    def arrow_type(self) -> pa.DataType:
        """The ``feature`` column's type: ``fixed_size_list<float32, dim>``, or a list of
        those (one per frame) for a variable-length expert."""
        item = pa.list_(pa.float32(), self.dim)
        return pa.list_(item) if self.variable_length else item


@dataclass
class DatasetMeta:
    """What ``rudder.json`` records about a dataset."""

    name: str
    version: str
    languages: list[str]
    experts: dict[str, ExpertInfo] = field(default_factory=dict)
    simulated: bool = False
    extra: dict = field(default_factory=dict)
    text_features_dim: int | None = None  # D of the optional text_features config

    def to_json(self) -> str:
        data = {
            "name": self.name,
            "version": self.version,
            "languages": self.languages,
            "experts": {k: vars(v) for k, v in sorted(self.experts.items())},
            "simulated": self.simulated,
            "extra": self.extra,
            **({"text_features_dim": self.text_features_dim} if self.text_features_dim else {}),
        }
        return json.dumps(data, indent=2, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str, source: str) -> DatasetMeta:
        try:
            data = json.loads(text)
            experts = {k: ExpertInfo(**v) for k, v in data.get("experts", {}).items()}
            for name, info in experts.items():
                if not _positive_int(info.dim) or not isinstance(info.variable_length, bool):
                    raise TypeError(f"experts.{name} needs an integer dim >= 1 and a boolean "
                                    f"variable_length, got {vars(info)}")
            text_dim = data.get("text_features_dim")
            if text_dim is not None and not _positive_int(text_dim):
                raise TypeError(f"text_features_dim must be an integer >= 1, got {text_dim!r}")
            return cls(
                name=data["name"],
                version=str(data["version"]),
                languages=list(data["languages"]),
                experts=experts,
                simulated=bool(data.get("simulated", False)),
                extra=data.get("extra", {}),
                text_features_dim=data.get("text_features_dim"),
            )
        except (KeyError, TypeError, json.JSONDecodeError) as error:
            raise LayoutError(f"{source}: not a valid rudder.json ({error})") from error


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


class DatasetFolder:
    """Read access to a dataset folder written by
    :class:`rudder.data.layout_writer.DatasetWriter` (or a Hub snapshot)."""

    def __init__(self, root):
        self.root = Path(root)
        complete_pending(self.root)  # an update a killed writer committed but did not apply
        meta_path = self.root / "rudder.json"
        if not meta_path.is_file():
            raise LayoutError(
                f"{self.root} is not a rudder dataset: {meta_path.name} is missing "
                "(build one with `python -m datasets_scripts build` or use the sample)"
            )
        self.meta = DatasetMeta.from_json(meta_path.read_text(encoding="utf-8"), str(meta_path))

    @property
    def experts(self) -> list[str]:
        return sorted(self.meta.experts)

    def _read(self, folder: str, split: str, columns=None) -> pa.Table | None:
        """Read one split; ``None`` when the split is empty (its file is left out)."""
        if split not in SPLITS:
            raise LayoutError(f"unknown split {split!r}; use one of {list(SPLITS)}")
        path = self.root / folder / f"{split}.parquet"
        if not path.is_file():
            return None
        return _read_parquet(path, columns)

    def _read_required(self, folder: str, split: str, columns=None) -> pa.Table:
        table = self._read(folder, split, columns)
        if table is None:
            raise LayoutError(
                f"{self.root / folder / (split + '.parquet')} is missing: the dataset has no "
                f"{split!r} split; choose one of the splits it has"
            )
        return table

    def captions(self, split: str, columns=None) -> pa.Table:
        return self._read_required("captions", split, columns)

    def videos(self, split: str) -> pa.Table:
        return self._read_required("videos", split)

    def features(self, expert: str, split: str) -> pa.Table | None:
        """An expert's features for a split; ``None`` when no video of the split has it."""
        if expert not in self.meta.experts:
            raise LayoutError(f"{self.root}: no expert {expert!r}; available: {self.experts}")
        return self._read(f"features/{expert}", split)

    def text_features_file(self, split: str) -> pq.ParquetFile:
        """The ``text_features`` parquet file of a split, to read row group by row group."""
        if not self.meta.text_features_dim:
            raise LayoutError(
                f"{self.root} has no text_features config; build it with --text-features "
                "(datasets_scripts build) or choose another data.text_encoder"
            )
        path = self.root / "text_features" / f"{split}.parquet"
        if not path.is_file():
            raise LayoutError(f"{path} is missing: the text_features config has no {split!r} split")
        return _read_parquet(path, reader=pq.ParquetFile)

    def missing_splits(self, folder: str) -> list[Path]:
        """Split files of ``folder`` (``captions``, ``videos``) that should be there but are
        not: listed by the card, or (without a card) of a split whose videos file has rows."""
        listed = listed_paths(self.root, folder)
        if not listed:
            listed = [f"{folder}/{s}.parquet" for s in SPLITS
                      if (v := self.root / "videos" / f"{s}.parquet").is_file()
                      and _read_parquet(v, reader=pq.ParquetFile).metadata.num_rows]
        return [self.root / p for p in listed if not (self.root / p).is_file()]

    def check_splits_agree(self) -> None:
        """Refuse captions whose splits disagree on the noun/verb columns (some splits
        labelled, others not: a folder an interrupted or partial rewrite left), naming the
        fix; reads only the files' footers."""
        have = {}
        for split in SPLITS:
            path = self.root / "captions" / f"{split}.parquet"
            if path.is_file():
                names = _read_parquet(path, reader=pq.read_schema).names
                have[split] = tuple(c for c in NOUN_VERB_COLUMNS if c in names)
        if len(set(have.values())) > 1:
            parts = "; ".join(f"captions/{s}.parquet has {list(c) or 'none'}"
                              for s, c in have.items())
            raise LayoutError(
                f"{self.root}: the caption splits disagree on the noun/verb columns ({parts}); "
                f"label every split again with `python -m heuristics label {self.root} "
                "--overwrite` (or rebuild the dataset)"
            )

    def relations(self) -> pa.Table | None:
        path = self.root / "relations" / "all.parquet"
        return _read_parquet(path) if path.is_file() else None

    def fingerprint(self) -> str:
        """SHA-256 over the file names, sizes and metadata: identifies the data of a run
        (resume checks, experiment keys), the same on every machine that builds the same
        data. It does not see values rewritten at the same sizes; :meth:`content_digests`
        does, where the content matters (the app's index cache)."""
        digest = hashlib.sha256()
        for path in sorted(self.root.rglob("*.parquet")):
            if any(part.startswith(".") for part in path.relative_to(self.root).parts):
                continue  # a writer's staging, not the dataset
            digest.update(str(path.relative_to(self.root)).encode())
            digest.update(str(path.stat().st_size).encode())
        digest.update((self.root / "rudder.json").read_bytes())
        return digest.hexdigest()[:16]

    def content_digests(self) -> str:
        """The card's data digests, one line: SHA-256 of every config's file bytes, kept
        fresh by every rudder writer (:mod:`rudder.data.card`), so free to read at any scale;
        empty for a folder without a card. Bytes depend on the writer's pyarrow version, so
        these are for caches on one machine, not for identities shared between machines."""
        return json.dumps(card_digests(self.root), sort_keys=True)


def _read_parquet(path: Path, columns=None, reader=None):
    """``pq.read_table(path, columns)`` (or ``reader(path)``); a damaged file is a
    LayoutError naming it."""
    try:
        return reader(path) if reader else pq.read_table(path, columns=columns)
    except (pa.ArrowException, OSError) as error:
        raise LayoutError(f"{path}: cannot read the table ({error}); rebuild the dataset "
                          "folder (python -m datasets_scripts build)") from None
