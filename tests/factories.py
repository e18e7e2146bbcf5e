"""The one factory for the small dataset folders the tests write.

:func:`write_dataset` writes a folder in the real layout from plain Python values (the
experts a video has are the ones it has features for); :func:`caption` makes one caption
row; :func:`concept_dataset` generates the learnable toy dataset of the training and
experiment tests; :func:`tiny_config` is the run configuration that trains on it in
seconds. Conftests and tests import them relatively (``from ..factories import ...``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rudder.data.card import Card
from rudder.data.layout import CAPTIONS_SCHEMA, NOUN_VERB_COLUMNS, DatasetMeta, ExpertInfo
from rudder.data.layout_writer import DatasetWriter

# concept id -> (en, mr)
NOUNS = {
    "n:bottle": ("bottle", "बाटली"),
    "n:straw": ("straw", "स्ट्रॉ"),
    "n:magnet": ("magnet", "चुंबक"),
    "n:card": ("card", "कार्ड"),
    "n:balloon": ("balloon", "फुगा"),
    "n:thread": ("thread", "दोरा"),
}
VERBS = {"v:cut": ("cut", "कापा"), "v:glue": ("glue", "चिकटवा"), "v:tie": ("tie", "बांधा")}


def caption(
    caption_id: str,
    video_id: str,
    lang: str,
    text: str,
    *,
    start: float = 0.0,
    end: float = 5.0,
    kind: str = "caption",
    machine_translated: bool = False,
    **columns,
) -> dict:
    """One caption row; ``columns`` adds label columns (nouns, verbs, ...) or others."""
    return {
        "caption_id": caption_id,
        "video_id": video_id,
        "lang": lang,
        "text": text,
        "start": start,
        "end": end,
        "kind": kind,
        "machine_translated": machine_translated,
        **columns,
    }


def write_dataset(
    path,
    splits: dict[str, str],
    captions: list[dict],
    features: dict[str, tuple[ExpertInfo, list[str], object]],
    *,
    languages,
    relations: list[tuple[str, str, int, str]] = (),
    name: str = "tiny",
    version: str = "1",
    duration: float = 10.0,
    card: Card | None = None,
):
    """Write a dataset folder and return ``path``.

    ``splits`` maps each video id to its split (in video order); ``features`` maps each
    expert to ``(info, video ids, values)`` as :meth:`DatasetWriter.write_expert` takes them,
    and a video has the experts it has features for. ``relations`` are
    ``(caption_id_a, caption_id_b, label, annotator)`` rows. Captions get the layout's
    column types (label columns are lists of strings).
    """
    meta = DatasetMeta(
        name, version, list(languages), {e: info for e, (info, _, _) in features.items()}
    )
    having = {e: set(ids) for e, (_, ids, _) in features.items()}
    video_ids = list(splits)
    with DatasetWriter(path, meta, card or Card("Tiny", "Tiny synthetic test dataset.")) as writer:
        writer.write_videos(
            pa.table(
                {
                    "video_id": video_ids,
                    "duration": [duration] * len(video_ids),
                    "split": [splits[v] for v in video_ids],
                    "experts": [[e for e in features if v in having[e]] for v in video_ids],
                }
            )
        )
        writer.write_captions(_captions_table(captions))
        for expert, (_, ids, values) in features.items():
            writer.write_expert(expert, [(ids, values)])
        if relations:
            columns = ("caption_id_a", "caption_id_b", "label", "annotator")
            lists = map(list, zip(*relations, strict=True))
            writer.write_relations(pa.table(dict(zip(columns, lists, strict=True))))
    return path


def _captions_table(rows: list[dict]) -> pa.Table:
    table = pa.Table.from_pylist(rows)
    types = {f.name: f.type for f in CAPTIONS_SCHEMA} | dict.fromkeys(
        NOUN_VERB_COLUMNS, pa.list_(pa.string())
    )
    schema = pa.schema([(c, types.get(c, table.schema.field(c).type)) for c in table.column_names])
    return table.cast(schema)


def concept_dataset(
    path,
    num_videos: int = 48,
    *,
    split_counts: tuple[int, int] | None = None,
    object_dim: int = 16,
    audio_dim: int = 8,
    audio_frames: int = 3,
    audio_missing_every: int = 3,
    relations: list[tuple[str, str, int, str]] = (),
    seed: int = 0,
):
    """A learnable toy dataset: each video has 2 materials and 1 action (noun and verb
    classes of :data:`NOUNS`, :data:`VERBS`), an English and a Marathi caption with their
    nouns/verbs columns, and two experts whose features are noisy random projections of
    the video's concept code: ``object`` (``object_dim``) and variable-length ``audio@mr``
    (``audio_frames`` x ``audio_dim``; every ``audio_missing_every``-th video has none,
    0: all have it).

    ``split_counts`` = (train, validation) videos, the rest test; by default 60/20/20 %.
    """
    rng = np.random.default_rng(seed)
    nouns, verbs = list(NOUNS), list(VERBS)
    dim = len(nouns) + len(verbs)
    projection = {
        "object": rng.normal(size=(dim, object_dim)),
        "audio": rng.normal(size=(dim, audio_dim)),
    }
    video_ids = [f"v{i:03d}" for i in range(num_videos)]
    train, validation = split_counts or (
        num_videos * 6 // 10,
        num_videos * 8 // 10 - num_videos * 6 // 10,
    )
    splits = (
        ["train"] * train
        + ["validation"] * validation
        + ["test"] * (num_videos - train - validation)
    )
    rows, codes = [], np.zeros((num_videos, dim))
    for i, vid in enumerate(video_ids):
        chosen_n = rng.choice(len(nouns), 2, replace=False)
        chosen_v = rng.choice(len(verbs), 1)
        codes[i, chosen_n] = 1
        codes[i, len(nouns) + chosen_v] = 1
        for lang, col in (("en", 0), ("mr", 1)):
            n_words = [NOUNS[nouns[j]][col] for j in chosen_n]
            v_word = VERBS[verbs[chosen_v[0]]][col]
            text = (
                f"{v_word} the {n_words[0]} and {n_words[1]}"
                if lang == "en"
                else f"{n_words[0]} आणि {n_words[1]} {v_word}"
            )
            rows.append(
                caption(
                    f"{vid}-{lang}",
                    vid,
                    lang,
                    text,
                    kind="describing",
                    nouns=n_words,
                    verbs=[v_word],
                    noun_classes=[nouns[j] for j in chosen_n],
                    verb_classes=[verbs[chosen_v[0]]],
                )
            )
    objects = codes @ projection["object"] + 0.3 * rng.normal(size=(num_videos, object_dim))
    audio_rows = [
        i for i in range(num_videos) if not audio_missing_every or i % audio_missing_every
    ]
    audio = [
        np.tile(codes[i] @ projection["audio"], (audio_frames, 1))
        + 0.3 * rng.normal(size=(audio_frames, audio_dim))
        for i in audio_rows
    ]
    features = {
        "object": (ExpertInfo(object_dim), video_ids, objects),
        "audio@mr": (ExpertInfo(audio_dim, True), [video_ids[i] for i in audio_rows], audio),
    }
    return write_dataset(
        path,
        dict(zip(video_ids, splits, strict=False)),
        rows,
        features,
        languages=["mr", "en"],
        relations=relations,
    )


def tiny_config(dataset, loss: str = "mm", params: dict | None = None, *, data: dict | None = None,
                **sections):
    """A ``TrainConfig`` for :func:`concept_dataset` that trains in seconds: a small model,
    Marathi and English captions, Marathi audio; ``params`` are the loss's, ``data`` adds
    data fields and ``sections`` other top-level fields (``supervision``, ``device``, ...)."""
    from rudder.config import from_dict

    return from_dict({
        "data": {"dataset": str(dataset), "caption_langs": ["mr", "en"], "audio_langs": ["mr"],
                 **(data or {})},
        "model": {"shared_dim": 16, "word_dim": 8, "text_vlad_clusters": 2,
                  "video_vlad_clusters": 2},
        "loss": {"name": loss, "params": dict(params or {})},
        **sections,
    })


def write_ce_text_features(dataset, path, tokens=3, dim: int = 5, seed: int = 0):
    """A Collaborative Experts text-feature pickle at ``path`` for ``dataset``'s English
    captions (CE's pickles encode those): ``{video_id: [(tokens, dim) array per caption]}``,
    random values; ``tokens`` an int or a function of the numpy generator. Returns ``path``."""
    import pickle

    from rudder.data.layout import DatasetFolder

    folder, rng, table = DatasetFolder(dataset), np.random.default_rng(seed), {}
    for split in ("train", "validation", "test"):
        captions = folder.captions(split, columns=["video_id", "lang"]).to_pydict()
        for video, lang in zip(captions["video_id"], captions["lang"], strict=True):
            if lang == "en":
                length = tokens(rng) if callable(tokens) else tokens
                table.setdefault(video, []).append(rng.normal(size=(length, dim)))
    path.write_bytes(pickle.dumps(table))
    return path
