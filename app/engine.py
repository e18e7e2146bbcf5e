"""The model-dependent layer of the app: encode a query, search the index, pick captions.

Everything else in the app works on plain tables; this is the one place that calls the
model. :class:`SearchEngine` is built from a model, its vocabulary and a collection (no
run directory needed), so tests can use a small randomly initialised model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from app.collection import Collection
from rudder.index import VideoIndex, load_or_build, mixture_query
from rudder.languages import check_language
from rudder.text import tokenize


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


class SearchEngine:
    """Text-to-video search over one collection with one model.

    ``encode(texts, langs) -> (tokens, mask)`` tokenises queries as training did (default:
    :func:`rudder.text.tokenize` per language and ``vocab.batch(max_len=max_words)``, what
    :func:`rudder.runs.encode_queries` does for a loaded run).
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
    ):
        self.model = model.eval()
        self.vocab = vocab
        self.collection = collection
        self.max_words = max_words
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
            [tokenize(t, lang) for t, lang in zip(texts, langs)], max_len=self.max_words
        )

    @torch.no_grad()
    def embed_texts(self, texts, langs) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-expert embeddings ``(n, E, D)`` and mixture logits ``(n, E)`` of texts."""
        tokens, mask = self.encode(list(texts), list(langs))
        return self.model.encode_text(tokens, mask)

    @torch.no_grad()
    def search(self, query: str, lang: str, k: int = 10, display_lang: str = "en") -> list[Hit]:
        """The top-``k`` videos for ``query`` written in ``lang``.

        Scores are the model's similarity (:meth:`VideoIndex.search`). Each hit shows its
        video's caption in ``display_lang`` closest to the query in the model's text space
        (``sum_e w_e <t_e(query), t_e(caption)>`` with the query's mixture weights ``w``);
        when the video has no caption in that language, the closest caption in any language.
        """
        check_language(lang, "the query language")
        check_language(display_lang, "the display language")
        text_emb, logits = self.embed_texts([query], [lang])
        found = self.index.search(text_emb, logits, k=min(k, len(self.index)))
        video_ids = [self.index.video_ids[i] for i in found.indices[0].tolist()]
        best = self._best_captions(text_emb, logits, video_ids, display_lang)
        hits = []
        for rank, (video_id, score) in enumerate(zip(video_ids, found.scores[0].tolist()), start=1):
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

    def _best_captions(self, text_emb, logits, video_ids, display_lang) -> dict[str, int]:
        """Video id -> row in ``collection.captions`` of the caption to show."""
        captions = self.collection.captions
        rows = np.concatenate(
            [self.collection.caption_rows(v) for v in video_ids] or [np.zeros(0, int)]
        )
        if len(rows) == 0:
            return {}
        table = captions.iloc[rows]
        cap_emb, _ = self.embed_texts(table["text"].tolist(), table["lang"].tolist())
        weighted, _ = mixture_query(text_emb, logits)  # (1, E*D)
        closeness = (cap_emb.reshape(len(rows), -1) @ weighted[0]).numpy()
        # Per video: captions in the display language first, then by closeness; keep the first.
        preferred = table["lang"].to_numpy() == display_lang
        order = np.lexsort((-closeness, ~preferred, table["video_id"].to_numpy()))
        videos = table["video_id"].to_numpy()[order]
        first = np.unique(videos, return_index=True)[1]
        return dict(zip(videos[first].tolist(), rows[order][first].tolist()))
