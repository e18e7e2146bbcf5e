"""The word-level text side of a run: its vocabulary (optionally with character n-gram
hashing) and the initial embedding table from pretrained word vectors; and the log line of
a run on a frozen text encoder instead (:func:`encoder_summary`).

Vocabulary: the training captions' tokens in ``data.caption_langs`` (``min_word_count``).
With ``data.word_vectors``, the words of the validation and test captions that the vectors
know are added too: their vectors are fixed pretrained knowledge, not something learnt
from those splits (Collaborative Experts likewise precomputes word2vec features for every
caption). Training words below ``min_word_count`` stay out (unless those splits have them
too). Any other unseen word maps to UNK (or, with n-gram hashing, to its n-grams).

Out-of-vocabulary handling of the vectors: a vocabulary word is looked up in the files of
the languages it appears in (sorted codes), then in the ``"all"`` file; a word found in
none is drawn from N(0, s^2), s the per-dimension standard deviation of the found
vectors (seeded), and is trained like every row unless ``model.freeze_embeddings``. A
fastText ``.bin`` gives every word with a known character n-gram its subword vector, so
few words stay random. PAD is the zero row; with n-gram hashing, the n-gram rows start at
zero, so a known word starts as its pretrained vector scaled by 1 / (1 + its n-grams).
"""

from __future__ import annotations

import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from rudder.data.layout import SPLITS, DatasetFolder, LayoutError
from rudder.data.loader import build_vocabulary
from rudder.text import Vocabulary, tokenize
from rudder.text.subwords import SubwordVocabulary
from rudder.text.word_vectors import WordVectorError, load_word_vectors


@dataclass
class TextSide:
    vocab: Vocabulary
    initial_embeddings: torch.Tensor | None  # (vocab.table_size, dim) or None
    summary: str


def build_text_side(folder: DatasetFolder, data, seed: int = 0) -> TextSide:
    """Vocabulary and initial embeddings of a run with config ``data`` (a ``DataConfig``)."""
    langs = list(data.caption_langs)
    words = build_vocabulary(folder, langs, data.min_word_count).tokens
    table, summary = None, f"vocabulary: {len(words)} tokens from the training captions"
    if data.word_vectors:
        token_langs: dict[str, set] = {}
        evaluated: set[str] = set()  # words of the validation and test captions
        for split in ("train", "validation", "test"):
            for tokens, lang in _split_tokens(folder, split, langs):
                for token in tokens:
                    token_langs.setdefault(token, set()).add(lang)
                if split != "train":
                    evaluated.update(tokens)
        sources = _load_sources(data.word_vectors, token_langs)
        known = set(words)
        extra = sorted(t for t in evaluated
                       if t not in known and _find(t, token_langs, sources) is not None)
        words = [*words, *extra]
        table, found = _table(words, token_langs, sources, seed)
        summary = (
            f"vocabulary: {len(words)} tokens ({len(extra)} more from validation and test "
            f"captions, known to the word vectors); pretrained vectors for {found} of "
            f"{len(words) - 2} "
            f"({100.0 * found / max(1, len(words) - 2):.1f}%), the rest drawn at random"
        )
    vocab = Vocabulary(words)
    if data.subword_buckets:
        vocab = SubwordVocabulary(words, data.subword_buckets, data.subword_min_n,
                                  data.subword_max_n)
        if table is not None:
            table = np.concatenate(
                [table, np.zeros((data.subword_buckets, table.shape[1]), np.float32)])
        summary += (f"; character {data.subword_min_n}-{data.subword_max_n}-grams in "
                    f"{data.subword_buckets} buckets")
    return TextSide(vocab, None if table is None else torch.from_numpy(table), summary)


def caption_langs_note(folder: DatasetFolder, langs, why: str) -> str:
    """One line for the run's log: the caption languages it uses, ``why`` (where the list
    comes from), and the dataset's captions in other languages it leaves out, with counts
    over all splits."""
    counts: Counter = Counter()
    for split in SPLITS:
        try:
            counts.update(folder.captions(split, columns=["lang"]).column("lang").to_pylist())
        except LayoutError:
            continue  # a split the dataset does not have
    total = sum(counts.values())
    used = sum(counts[lang] for lang in langs)
    line = (f"caption languages: {', '.join(langs)} ({why}): {used:,} of the dataset's "
            f"{total:,} captions")
    left = [lang for lang in sorted(counts) if lang not in langs]
    if left:
        line += "; left out: " + ", ".join(f"{lang} ({counts[lang]:,} captions)" for lang in left)
        line += f" (set data.caption_langs=[{','.join([*langs, *left])}] to use them)"
    return line


def _split_tokens(folder: DatasetFolder, split: str, langs) -> list[tuple[list[str], str]]:
    try:
        table = folder.captions(split, columns=["text", "lang"]).to_pydict()
    except LayoutError:
        return []
    return [(tokenize(t, lang), lang) for t, lang in zip(table["text"], table["lang"], strict=True)
            if lang in langs]


def _load_sources(spec: dict, token_langs: dict) -> dict:
    sources, dims = {}, set()
    for key, path in spec.items():
        wanted = [t for t, langs in token_langs.items() if key == "all" or key in langs]
        sources[key] = load_word_vectors(path, wanted)
        dims.add(sources[key].dim)
    if len(dims) > 1:
        raise WordVectorError(
            f"data.word_vectors: files of different sizes {sorted(dims)} ({spec}); one embedding "
            "table needs one dimension"
        )
    return sources


def _find(token: str, token_langs: dict, sources: dict):
    for key in [*sorted(token_langs.get(token, ())), "all"]:
        if key in sources and (vector := sources[key].get(token)) is not None:
            return vector
    return None


def _table(words, token_langs, sources, seed) -> tuple[np.ndarray, int]:
    dim = next(iter(sources.values())).dim
    table = np.zeros((len(words), dim), np.float32)
    found = np.zeros(len(words), dtype=bool)
    for row, word in enumerate(words[2:], start=2):
        vector = _find(word, token_langs, sources)
        if vector is not None:
            table[row], found[row] = vector, True
    std = table[found].std(axis=0) if found.sum() > 1 else np.full(dim, 0.1, np.float32)
    missing = ~found
    missing[0] = False  # PAD stays the zero row; UNK is drawn like any unknown word
    rng = np.random.default_rng(seed)
    table[missing] = rng.normal(0.0, 1.0, (int(missing.sum()), dim)).astype(np.float32) * std
    return table, int(found.sum())


def cache_shards(encoder) -> set[Path] | None:
    """The files of a frozen text encoder's embedding cache now (None: it has no cache)."""
    cache = getattr(encoder, "cache", None)
    if cache is None:
        return None
    return set(Path(cache.folder).glob("*.npz")) if Path(cache.folder).is_dir() else set()


def encoder_summary(spec: str, encoder, cached_before: set[Path] | None) -> str:
    """The log line that names a run's frozen text side and, for a cached sentence encoder,
    whether the embedding cache served its training and validation captions (no new shard
    written since ``cached_before``) or they were encoded now."""
    from rudder.text.encoders import ENCODERS

    known = ENCODERS.get(spec)
    what = known.summary if known else f"vectors of {spec}"
    line = f"text side: data.text_encoder={spec}, {what}, {encoder.dim}-d, frozen"
    if cached_before is None:
        return line
    folder = encoder.cache.folder
    new = sorted(cache_shards(encoder) - cached_before)  # type: ignore[operator]  # a cache
    if not new:
        return f"{line}; training and validation captions read from the embedding cache {folder}"
    encoded = sum(_rows(shard) for shard in new)
    return (f"{line}; {encoded:,} training and validation captions were not in the embedding "
            f"cache: encoded now and stored in {folder} (a later run reads them from there)")


def _rows(shard: Path) -> int:
    """Rows of an embedding-cache shard (its ``keys``; 0 if it cannot be read)."""
    try:
        with np.load(shard, allow_pickle=False) as data:
            return len(data["keys"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return 0
