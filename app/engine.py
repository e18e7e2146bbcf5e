"""The model-dependent layer of the app: encode a query, search the index, pick captions.

Everything else in the app works on plain tables; this is the one place that calls the
model. :class:`SearchEngine` is built from a model, its vocabulary and a collection (no
run directory needed), so tests can use a small randomly initialised model.

It also says how much of a query the model can read (:meth:`SearchEngine.coverage`): the
query's language among the model's training caption languages, and which of its words the
training vocabulary lacks (they all become the one unknown token).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from rudder.languages import SUPPORTED, check_language, check_query_language
from rudder.search.index import VideoIndex, mixture_query
from rudder.search.index_cache import load_or_build
from rudder.text import tokenize

from .collection import Collection


@dataclass
class Hit:
    """One ranked video with the caption chosen to show for it."""

    rank: int
    video_id: str
    score: float
    caption_id: str | None
    caption: str
    caption_lang: str | None
    start: float | None
    end: float | None
    experts: list[str]


@dataclass
class Coverage:
    """How much of a query the model can read."""

    lang_trained: bool  # the query language is one of the model's training languages
    words: list[str]  # the query's tokens
    unknown: list[str]  # those missing from the vocabulary (empty when not checked)

    @property
    def mostly_unknown(self) -> bool:
        return 2 * len(self.unknown) > len(self.words)

    @property
    def nothing_known(self) -> bool:
        return bool(self.words) and len(self.unknown) == len(self.words)


class SearchEngine:
    """Text-to-video search over one collection with one model.

    ``encode(texts, langs) -> (tokens, mask)`` tokenises queries as training did (default:
    :func:`rudder.text.tokenize` per language and ``vocab.batch(max_len=max_words)``, what
    :func:`rudder.runs.folders.encode_queries` does for a loaded run). ``train_langs`` are the
    model's training caption languages (default: all supported); ``check_words=False``
    skips the vocabulary check (a frozen pretrained text encoder has its own tokeniser);
    ``fitted_langs`` are the languages whose text fitted the text side's statistics
    without being trained on (so a query in one is not zero-shot).
    """

    def __init__(
        self,
        model,
        vocab,
        collection: Collection,
        index: VideoIndex | None = None,
        encode=None,
        max_words: int = 30,
        max_frames: int = 32,
        model_key: str | None = None,
        cache_dir=None,
        train_langs=SUPPORTED,
        check_words: bool = True,
        text_encoder: str | None = None,
        fitted_langs=(),
    ):
        self.model = model.eval()
        self.vocab = vocab
        self.collection = collection
        self.max_words = max_words
        self.train_langs = tuple(train_langs)
        self.check_words = check_words
        self.text_encoder = text_encoder
        self.fitted_langs = tuple(fitted_langs)
        self.encode = encode or self._encode
        self.index = index or load_or_build(
            model,
            collection.folder,
            model_key=model_key,
            cache_dir=cache_dir,
            max_frames=max_frames,
        )

    def _encode(self, texts, langs):
        return self.vocab.batch(
            [tokenize(t, lang) for t, lang in zip(texts, langs, strict=False)],
            max_len=self.max_words,
        )

    def coverage(self, query: str, lang: str) -> Coverage:
        """Whether ``lang`` is a training language, and the query's out-of-vocabulary words."""
        words = tokenize(query, check_query_language(lang, "the query language"))
        unknown = [w for w in words if w not in self.vocab] if self.check_words else []
        return Coverage(lang in self.train_langs, words, unknown)

    @torch.no_grad()
    def embed_texts(self, texts, langs) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-expert embeddings ``(n, E, D)`` and mixture logits ``(n, E)`` of texts."""
        tokens, mask = self.encode(list(texts), list(langs))
        return self.model.encode_text(tokens, mask)

    @torch.no_grad()
    def search(self, query: str, lang: str, k: int = 10, display_lang: str = "en") -> list[Hit]:
        """The top-``k`` videos for ``query`` written in ``lang``.

        Scores are the model's similarity (:meth:`VideoIndex.search`). Each hit shows the
        caption chosen by :meth:`_best_captions`.
        """
        check_query_language(lang, "the query language")
        check_language(display_lang, "the display language")
        text_emb, logits = self.embed_texts([query], [lang])
        found = self.index.search(text_emb, logits, k=min(k, len(self.index)))
        video_ids = [self.index.video_ids[i] for i in found.indices[0].tolist()]
        best = self._best_captions(query, lang, text_emb, logits, video_ids, display_lang)
        hits = []
        scores = found.scores[0].tolist()
        for rank, (video_id, score) in enumerate(zip(video_ids, scores, strict=False), start=1):
            row = best.get(video_id)
            caption = self.collection.record(row) if row is not None else None
            hits.append(
                Hit(
                    rank=rank,
                    video_id=video_id,
                    score=score,
                    caption_id=None if caption is None else caption["caption_id"],
                    caption="" if caption is None else caption["text"],
                    caption_lang=None if caption is None else caption["lang"],
                    start=None if caption is None else float(caption["start"]),
                    end=None if caption is None else float(caption["end"]),
                    experts=self.collection.experts_of(video_id),
                )
            )
        return hits

    def _best_captions(
        self, query, lang, text_emb, logits, video_ids, display_lang
    ) -> dict[str, int]:
        """Video id -> row in ``collection.captions`` of the caption to show.

        First the caption of the video that matches the query: among its captions in the
        query's language (when it has some) the one holding most of the query's words, then
        the closest in the model's text space (``sum_e w_e <t_e(query), t_e(caption)>``
        with the query's mixture weights ``w``); otherwise the closest caption in any
        language. Shown is that caption if it is in ``display_lang``, else its translation:
        the ``display_lang`` caption of the same segment (same start and end), else the
        closest ``display_lang`` caption, else the matching caption itself.
        """
        rows = np.concatenate(
            [self.collection.caption_rows(v) for v in video_ids] or [np.zeros(0, int)]
        )
        if len(rows) == 0:
            return {}
        table = self.collection.captions.iloc[rows][["video_id", "lang", "start", "end"]]
        table = table.assign(row=rows)
        cap_emb, _ = self.embed_texts(self.collection.captions["text"].iloc[rows], table["lang"])
        weighted, _ = mixture_query(text_emb, logits)  # (1, E*D)
        table["closeness"] = (cap_emb.reshape(len(rows), -1) @ weighted[0]).numpy()
        same = (table["lang"] == lang).to_numpy()
        table["query_lang"] = same
        table["overlap"] = 0.0
        table.loc[same, "overlap"] = word_overlap(
            query, lang, self.collection.captions["text"].iloc[rows[same]]
        )
        match = _first_per_video(table, ["query_lang", "overlap", "closeness"])
        segment = match.set_index("video_id")[["start", "end"]].reindex(table["video_id"])
        display = (table["lang"] == display_lang).to_numpy()
        aligned = (
            display
            & (segment["start"].to_numpy() == table["start"].to_numpy())
            & (segment["end"].to_numpy() == table["end"].to_numpy())
        )
        is_match = table["row"].isin(match["row"]).to_numpy()
        table["tier"] = np.select(
            [display & is_match, aligned, display, is_match], [4, 3, 2, 1], 0
        )
        shown = _first_per_video(table, ["tier", "closeness"])
        return dict(zip(shown["video_id"], shown["row"].astype(int), strict=True))


def word_overlap(query: str, lang: str, texts) -> np.ndarray:
    """Fraction of the query's distinct words found in each text (all in ``lang``)."""
    words = set(tokenize(query, lang))
    if not words:
        return np.zeros(len(texts))
    return np.array([len(words & set(tokenize(t, lang))) / len(words) for t in texts])


def _first_per_video(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per video, the row with the largest ``keys`` (compared in order; ties: table order)."""
    ranked = table.sort_values(keys, ascending=False, kind="stable")
    return ranked.drop_duplicates("video_id")
