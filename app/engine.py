"""The model-dependent layer of the app: encode a query, search the index, pick captions.

Everything else in the app works on plain tables; this is the one place that calls the
model. :class:`SearchEngine` is built from a model, its vocabulary and a collection (no
run directory needed), so tests can use a small randomly initialised model.

It also says how much of a query the model can read (:meth:`SearchEngine.coverage`): the
query's language among the model's training caption languages, and which of its words the
training vocabulary lacks (they all become the one unknown token).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch

from rudder.evaluation.inference import TEXT_BLOCK, embed_texts, pad_steps, similarities
from rudder.languages import SUPPORTED, check_language, check_query_language
from rudder.runs.trained_model import token_inputs
from rudder.search.index import VideoIndex, mixture_query
from rudder.search.index_cache import load_or_build
from rudder.text import tokenize

from .coalesce import Coalescer
from .collection import Collection

# Caption embeddings the engine keeps (one row of E*D floats per caption), the least recently
# shown videos' dropped first: 50,000 rows of 7 x 256 floats are 360 MB.
CAPTION_CACHE_ROWS = 50_000


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

    ``encode(texts, langs) -> (tokens, mask)`` turns queries into the model's text inputs
    (default: :func:`rudder.runs.trained_model.token_inputs`, the token ids a
    :class:`~rudder.runs.trained_model.TrainedModel` without a text encoder gives; a loaded
    model's engine is :func:`app.served_run.engine_for`). ``train_langs`` are the
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
        self._caption_cache: OrderedDict[str, torch.Tensor] = OrderedDict()
        self._caption_cache_rows = 0
        self._caption_lock = threading.Lock()
        self._queries: Coalescer[tuple[str, str], tuple]
        self._queries = Coalescer(self._score_queries, TEXT_BLOCK)  # one text block a pass
        self.index = index or load_or_build(
            model,
            collection.folder,
            model_key=model_key,
            cache_dir=cache_dir,
            max_frames=max_frames,
        )

    def _encode(self, texts, langs):
        return token_inputs(self.vocab, texts, langs, self.max_words)

    def coverage(self, query: str, lang: str) -> Coverage:
        """Whether ``lang`` is a training language, and the query's out-of-vocabulary words."""
        words = tokenize(query, check_query_language(lang, "the query language"))
        unknown = [w for w in words if w not in self.vocab] if self.check_words else []
        return Coverage(lang in self.train_langs, words, unknown)

    def embed_texts(self, texts, langs) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-expert embeddings ``(n, E, D)`` and mixture logits ``(n, E)`` of texts, as
        evaluation embeds captions (:func:`rudder.evaluation.inference.embed_texts`)."""
        tokens, mask = self.encode(list(texts), list(langs))
        device = next(self.model.parameters()).device
        return embed_texts(self.model, lambda rows: (tokens[rows], mask[rows]), len(tokens),
                           device, self.max_words)

    @torch.no_grad()
    def _score_queries(self, queries: list[tuple[str, str]]) -> list[tuple]:
        """Per ``(query, lang)``: its embedding ``(1, E, D)``, mixture logits ``(1, E)`` and
        similarity to every video ``(V,)``, all queries through one model pass. Each query is
        encoded on its own (as :meth:`embed_texts` encodes it), and a row's numbers in a
        padded block do not depend on the other rows, so each query gets exactly the numbers
        it gets when searched alone."""
        encoded = [self.encode([query], [lang]) for query, lang in queries]
        padded = [pad_steps(tokens, mask, self.max_words) for tokens, mask in encoded]
        if len({mask.shape[1] for _, mask in padded}) > 1:  # an input over max_words: alone
            return [self._score_queries([one])[0] for one in queries]
        tokens = torch.cat([tokens for tokens, _ in padded])
        mask = torch.cat([mask for _, mask in padded])
        device = next(self.model.parameters()).device
        text_emb, logits = embed_texts(self.model, lambda rows: (tokens[rows], mask[rows]),
                                       len(tokens), device, self.max_words)
        scores = similarities(self.model, text_emb, logits, self.index.embeddings,
                              self.index.available)
        return [(text_emb[i : i + 1], logits[i : i + 1], scores[i]) for i in range(len(queries))]

    def rank(self, text_emb: torch.Tensor, logits: torch.Tensor, k: int):
        """Positions in the index ``(k,)`` and scores of the ``k`` best videos for one
        embedded query: its similarity to every video, computed as evaluation computes a
        caption's (:func:`rudder.evaluation.inference.similarities`), so a caption searched
        here scores what ``rudder.evaluate`` gives it; ties: the lower index first."""
        scores = similarities(self.model, text_emb, logits, self.index.embeddings,
                              self.index.available)[0]
        order = torch.sort(scores, descending=True, stable=True).indices[:k]
        return order, scores[order]

    @torch.no_grad()
    def caption_vectors(self, video_ids) -> torch.Tensor:
        """Per-expert embeddings of the captions of ``video_ids``, concatenated ``(n, E*D)``,
        in the order of :meth:`Collection.caption_rows` video by video.

        Each video's captions are encoded together, on their own, so a video's vectors do
        not depend on which other videos a search found; they are kept for the next searches
        (at most :data:`CAPTION_CACHE_ROWS` rows, the least recently used videos dropped).
        """
        parts = []
        for video_id in video_ids:
            with self._caption_lock:
                vectors = self._caption_cache.get(video_id)
                if vectors is not None:
                    self._caption_cache.move_to_end(video_id)
            if vectors is None:
                captions = self.collection.captions.iloc[self.collection.caption_rows(video_id)]
                vectors = (self.embed_texts(captions["text"], captions["lang"])[0].flatten(1)
                           if len(captions) else torch.zeros(0, self.index.flat.shape[1]))
                self._remember(video_id, vectors)
            parts.append(vectors)
        return torch.cat(parts) if parts else torch.zeros(0, 0)

    def _remember(self, video_id: str, vectors: torch.Tensor) -> None:
        with self._caption_lock:
            if video_id not in self._caption_cache:
                self._caption_cache_rows += len(vectors)
            self._caption_cache[video_id] = vectors
            while self._caption_cache_rows > CAPTION_CACHE_ROWS and len(self._caption_cache) > 1:
                _, dropped = self._caption_cache.popitem(last=False)
                self._caption_cache_rows -= len(dropped)

    @torch.no_grad()
    def search(self, query: str, lang: str, k: int = 10, display_lang: str = "en") -> list[Hit]:
        """The top-``k`` videos for ``query`` written in ``lang``.

        Scores are the model's similarity (the numbers of :meth:`rank`). Searches that
        arrive while another one's model pass runs share the next pass
        (:class:`app.coalesce.Coalescer`), which leaves every query's numbers as they are
        alone. Each hit shows the caption chosen by :meth:`_best_captions`.
        """
        check_query_language(lang, "the query language")
        check_language(display_lang, "the display language")
        text_emb, logits, scores = self._queries((query, lang))
        order = torch.sort(scores, descending=True, stable=True).indices[:k]
        top = scores[order]
        video_ids = [self.index.video_ids[i] for i in order.tolist()]
        best = self._best_captions(query, lang, text_emb, logits, video_ids, display_lang)
        hits = []
        for rank, (video_id, score) in enumerate(zip(video_ids, top.tolist(), strict=False),
                                                 start=1):
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
        per_video = [self.collection.caption_rows(v) for v in video_ids]
        rows = np.concatenate(per_video or [np.zeros(0, int)]).astype(np.int64)
        if len(rows) == 0:
            return {}
        owner = np.repeat(np.arange(len(per_video)), [len(r) for r in per_video])
        captions = self.collection.captions[["lang", "start", "end", "text"]].iloc[rows]
        langs, starts, ends, texts = (captions[c].to_numpy() for c in captions.columns)
        weighted, _ = mixture_query(text_emb, logits)  # (1, E*D)
        closeness = (self.caption_vectors(video_ids) @ weighted[0]).numpy()
        same = langs == lang
        overlap = np.zeros(len(rows))
        overlap[same] = word_overlap(query, lang, texts[same])
        match = _first_per_video(owner, [same, overlap, closeness])  # a row per owner
        match_of = np.zeros(len(per_video), dtype=np.int64)  # videos without captions: unused
        match_of[owner[match]] = match
        display = langs == display_lang
        aligned = (display & (starts == starts[match_of[owner]])
                   & (ends == ends[match_of[owner]]))
        is_match = np.zeros(len(rows), dtype=bool)
        is_match[match] = True
        tier = np.select([display & is_match, aligned, display, is_match], [4, 3, 2, 1], 0)
        shown = _first_per_video(owner, [tier, closeness])
        return {video_ids[owner[i]]: int(rows[i]) for i in shown}


def word_overlap(query: str, lang: str, texts) -> np.ndarray:
    """Fraction of the query's distinct words found in each text (all in ``lang``)."""
    words = set(tokenize(query, lang))
    if not words:
        return np.zeros(len(texts))
    return np.array([len(words & set(tokenize(t, lang))) / len(words) for t in texts])


def _first_per_video(owner: np.ndarray, keys: list[np.ndarray]) -> np.ndarray:
    """Per owner (video), in owner order, the position of the row with the largest ``keys``
    (compared in order; ties: the first row). ``owner`` is grouped (non-decreasing)."""
    order = np.lexsort([np.arange(len(owner)), *(np.negative(k.astype(float)) for k in keys[::-1]),
                        owner])
    first = np.r_[True, owner[order][1:] != owner[order][:-1]]
    return order[first]
