"""Steps every builder shares: caption rows, split helpers, the feature passes, the write.

A source module reads its release into a :class:`RawDataset` (videos with splits, captions,
optional relations, the counts to check); :func:`write_dataset` scans the expert features
(first pass: shapes, availability, problems), then writes the folder with
``rudder.data.layout_writer.DatasetWriter`` (second pass: one expert streamed at a time).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rudder.data.layout import CAPTIONS_SCHEMA, NOUN_VERB_COLUMNS, SPLITS, DatasetMeta, ExpertInfo
from rudder.data.layout_writer import DatasetWriter
from rudder.languages import SUPPORTED

from .build_report import BuildError, Reporter, not_utf8
from .cards import fields_section, make_card
from .features import FeatureSource, feature_batches, scan_source

LIST_TYPE = pa.list_(pa.string())
# Longest caption a build accepts, in characters: paragraphs of the supported releases stay
# under ~3,000; a longer "caption" is a damaged file (a missing line end joins lines).
MAX_CAPTION_CHARS = 20_000


class CaptionRows:
    """Captions collected column by column (base columns, noun/verb columns when given)."""

    def __init__(self):
        self.columns: dict[str, list[Any]] = {name: [] for name in CAPTIONS_SCHEMA.names}
        self.noun_verb: dict[str, list] = {}
        self.ids: set[str] = set()

    def __len__(self) -> int:
        return len(self.columns["caption_id"])

    def add(
        self,
        caption_id,
        video_id,
        lang,
        text,
        start,
        end,
        kind="caption",
        machine_translated=False,
        noun_verb=None,
    ) -> None:
        if caption_id in self.ids:
            raise BuildError(f"caption id {caption_id!r} is used twice")
        if isinstance(text, str) and len(text) > MAX_CAPTION_CHARS:
            raise BuildError(
                f"caption {caption_id!r} (video {video_id!r}) has {len(text):,d} characters, "
                f"over the limit of {MAX_CAPTION_CHARS:,d}: the file is damaged (line ends "
                "missing?) or not a caption file; fix the source"
            )
        self.ids.add(caption_id)
        row = (caption_id, video_id, lang, text, start, end, kind, machine_translated)
        for name, value in zip(CAPTIONS_SCHEMA.names, row, strict=False):
            self.columns[name].append(value)
        for name, values in (noun_verb or {}).items():
            self.noun_verb.setdefault(name, [None] * (len(self) - 1)).append(values)
        for values in self.noun_verb.values():
            if len(values) < len(self):
                values.append(None)

    def table(self) -> pa.Table:
        arrays = [pa.array(self.columns[f.name], f.type) for f in CAPTIONS_SCHEMA]
        names = list(CAPTIONS_SCHEMA.names)
        for name in NOUN_VERB_COLUMNS:
            if name in self.noun_verb:
                arrays.append(pa.array(self.noun_verb[name], LIST_TYPE))
                names.append(name)
        return pa.Table.from_arrays(arrays, names=names)


@dataclass
class RawDataset:
    """A release read into memory, ready to write (features stay on disk)."""

    source: str
    videos: dict[str, dict]  # video_id -> {"split": str, "duration": float | None}
    captions: CaptionRows
    relations: pa.Table | None = None
    feature_sources: list[FeatureSource] = field(default_factory=list)
    method: list[str] = field(default_factory=list)  # how-it-was-built notes for the card
    extra: dict = field(default_factory=dict)
    # caption_id -> its entry in a CE text-feature pickle where that is not its rank among
    # its video's captions (None: not known, e.g. a sentence missing from the release)
    feature_entries: dict[str, int | None] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """``videos/<split>`` and ``captions/<split>`` counts, the keys sanity checks use."""
        got = Counter(f"videos/{v['split']}" for v in self.videos.values())
        got.update(f"captions/{self.videos[v]['split']}" for v in self.captions.columns["video_id"])
        return dict(got)


def read_json(path: Path, what: str):
    """Parse a JSON file, or stop with a BuildError naming the file and what it should hold."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise not_utf8(path, error) from error
    except (OSError, json.JSONDecodeError) as error:
        raise BuildError(f"{path}: cannot read {what} ({error})") from error


def holdout_validation(video_ids, fraction: float) -> set[str]:
    """A deterministic hold-out: the ``round(fraction * n)`` ids with the smallest SHA-256.

    Independent of file order and of the machine; adding videos moves few of the others.
    """
    if not 0 <= fraction < 1:
        raise BuildError(f"--validation-fraction {fraction}: use a number in [0, 1)")
    ids = sorted(set(video_ids), key=lambda v: hashlib.sha256(v.encode("utf-8")).hexdigest())
    return set(ids[: round(fraction * len(ids))])


def read_id_list(path, reporter: Reporter) -> dict[str, int]:
    """A video-id list (one per line, blank lines ignored) as ``{video_id: its line number}``
    in file order; duplicates are reported."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as error:
        raise not_utf8(path, error) from error
    except OSError as error:
        raise BuildError(f"{path}: cannot read the split list ({error})") from error
    ids = {}
    for number, line in enumerate(lines, start=1):
        video_id = line.strip()
        if not video_id:
            continue
        if video_id in ids:
            reporter.problem("duplicate id in split list", path, f"line {number}", video_id)
            continue
        ids[video_id] = number
    return ids


def _videos_table(raw: RawDataset, available: dict[str, list[str]]) -> pa.Table:
    ids = list(raw.videos)
    return pa.table(
        {
            "video_id": pa.array(ids, pa.string()),
            "duration": pa.array([raw.videos[v].get("duration") for v in ids], pa.float32()),
            "split": pa.array([raw.videos[v]["split"] for v in ids], pa.string()),
            "experts": pa.array([sorted(available.get(v, [])) for v in ids], LIST_TYPE),
        }
    )


def write_dataset(
    raw: RawDataset,
    out,
    reporter: Reporter,
    *,
    command: str = "",
    overwrite: bool = False,
    keep_zeros: bool = False,
    batch_size: int = 512,
    stream=None,
    text_features: Path | None = None,
) -> Path:
    """Scan the features, then write ``out`` atomically; returns ``out``. ``text_features``,
    a CE text-feature pickle, becomes the ``text_features`` config."""
    stream = stream or sys.stderr
    if not raw.videos:
        raise BuildError(f"{raw.source}: no videos were read; nothing to build")
    if not len(raw.captions):
        raise BuildError(
            f"{raw.source}: no captions were read (see the problems above); nothing to build"
        )
    used = set(raw.captions.columns["lang"])
    languages = [lang for lang in SUPPORTED if lang in used]
    wanted = set(raw.videos)
    scans: dict[str, Any] = {}
    available: dict[str, Any] = {}
    for source in raw.feature_sources:
        print(f"scanning expert {source.expert} ({source.location})", file=stream)
        scan = scan_source(source, wanted, reporter, keep_zeros)
        if scan is None:
            continue
        scans[source.expert] = (source, scan)
        for video_id in scan.video_ids:
            available.setdefault(video_id, []).append(source.expert)
        reporter.note(
            f"expert {source.expert}: {len(scan.video_ids)} of {len(wanted)} videos have "
            f"it ({scan.missing} marked missing in the source)"
        )
    experts = {e: ExpertInfo(s.dim, s.variable_length) for e, (_, s) in scans.items()}
    captions = raw.captions.table()
    has_relations = raw.relations is not None and raw.relations.num_rows > 0
    if raw.relations is not None and not has_relations:
        reporter.warn("relations: no valid row was read, so the dataset has no relations config")
    text_dim, text_batches = (
        _text_feature_batches(text_features, captions, batch_size, raw.feature_entries)
        if text_features is not None
        else (None, None)
    )
    fields = fields_section(captions.schema, experts, has_relations, text_dim)
    card = make_card(raw.source, _how_built(raw, command, reporter), fields)
    meta = DatasetMeta(
        name=raw.source,
        version="1.0",
        languages=languages,
        experts=experts,
        extra={
            **raw.extra,
            "source": raw.source,
            "command": command,
            "build": reporter.as_dict(),
            "card": dataclasses.asdict(card),
        },
    )
    out = Path(out)
    with DatasetWriter(out, meta, card, overwrite=overwrite) as writer:
        writer.write_videos(_videos_table(raw, available))
        writer.write_captions(captions)
        if has_relations:
            writer.write_relations(raw.relations)
        if text_features is not None:
            print(f"writing text features ({text_features})", file=stream)
            writer.write_text_features(text_dim, text_batches)
        for expert, (source, scan) in sorted(scans.items()):
            print(f"writing expert {expert} ({len(scan.video_ids)} videos)", file=stream)
            writer.write_expert(expert, feature_batches(source, scan, batch_size, keep_zeros))
    counts = raw.counts()
    per_split = ", ".join(
        f"{s} {counts.get('videos/' + s, 0)}/{counts.get('captions/' + s, 0)}" for s in SPLITS
    )
    print(
        f"built {out}: videos/captions {per_split}; experts {sorted(experts) or 'none'}",
        file=stream,
    )
    print(reporter.summary(), file=stream)
    return out


def _text_feature_batches(path: Path, captions: pa.Table, batch_size: int,
                          entries: dict[str, int | None]):
    """``(dim, batches)`` of a CE text-feature pickle: entry ``k`` of a video belongs to its
    ``k``-th caption in the release order (CE's ``text_features[vid][k]``), unless
    ``entries`` (:attr:`RawDataset.feature_entries`) names the caption's entry. The pickle
    encodes the English captions (:class:`CaptionFeatureFile`): captions in other languages
    get no text features, and ``k`` counts the English captions only."""
    from rudder.data.loader import caption_ordinals
    from rudder.text.caption_features import CaptionFeatureError, CaptionFeatureFile

    try:
        source = CaptionFeatureFile(path, max_tokens=None)
    except CaptionFeatureError as error:
        raise BuildError(str(error)) from None
    encoded = pc.equal(captions.column("lang"), source.lang)
    ids = captions.column("caption_id").filter(encoded).to_pylist()
    videos = captions.column("video_id").filter(encoded).to_pylist()
    ordinals = caption_ordinals(videos)
    if entries:
        unknown = [c for c in ids if c in entries and entries[c] is None]
        if unknown:
            raise BuildError(
                f"{path}: {len(unknown)} caption(s) have no known entry in the text features, "
                f"e.g. {unknown[:3]}: their sentence is not among their video's release "
                "captions, so which feature belongs to them is unknown"
            )
        ordinals = np.array([entries.get(c, k) for c, k in zip(ids, ordinals, strict=False)],
                            dtype=np.int64)

    def batches():
        for start in range(0, len(ids), batch_size):
            part = slice(start, start + batch_size)
            try:
                arrays = [source.array(v, int(k))
                          for v, k in zip(videos[part], ordinals[part], strict=False)]
            except CaptionFeatureError as error:
                raise BuildError(str(error)) from None
            yield ids[part], arrays

    return source.dim, batches()


def _how_built(raw: RawDataset, command: str, reporter: Reporter) -> str:
    lines = [
        f"Built with `{command}` (rudder datasets_scripts)."
        if command
        else "Built with rudder datasets_scripts."
    ]
    lines += [""] + [f"- {m}" for m in raw.method]
    if reporter.counts:
        skipped = ", ".join(f"{k}: {n}" for k, n in reporter.counts.most_common())
        lines += [f"- Bad input records skipped: {skipped}."]
    lines += [f"- Warning: {w}" for w in reporter.warnings]
    return "\n".join(lines)
