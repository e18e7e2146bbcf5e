"""Taggers: Stanza on local models, and a disk cache of tagger output.

Every tagger (this Stanza one, :class:`heuristics.lexicon_tagger.LexiconTagger`) has
``model_id(lang)`` (identifies the model, for the cache), ``tag_tokens(token_lists, lang)``
(pretokenised captions -> :class:`TaggedWord` lists) and ``tag(texts, lang)``, which
tokenises with :func:`rudder.text.tokenize` first.
:func:`tag_texts` tags a list of captions in bulk through a :class:`TagCache` (SQLite,
keyed by model id, language and text), so re-tagging a dataset costs nothing; with
``num_proc > 1`` the uncached captions are tagged with ``datasets.Dataset.map``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

from rudder.languages import check_language
from rudder.optional import require
from rudder.paths import cache_dir
from rudder.progress import progress

from .nouns_verbs import TaggedWord

MODEL_INFO = "rudder_tagger.json"  # written by train-tagger beside a language's models
LEMMA_LIST = "lemmas.txt"  # train-tagger: the training treebank's lemmas, one a line
_STANZA_CHUNK = 1000  # captions per Stanza call (bounds the size of one Document)


def model_dir(flag=None) -> Path:
    """The Stanza model folder every command uses (``train-tagger``, ``eval-tagger``, ``label``,
    ``tag``, ``download``): ``flag`` (their ``--model-dir``) when given, else
    ``$STANZA_RESOURCES_DIR``, else ``$RUDDER_CACHE/stanza`` (default
    ``~/.cache/rudder/stanza``)."""
    if flag:
        return Path(flag).expanduser()
    if os.environ.get("STANZA_RESOURCES_DIR"):
        return Path(os.environ["STANZA_RESOURCES_DIR"]).expanduser()
    return cache_dir("stanza")


class TaggerError(ValueError):
    """Bad tagger input or a model directory without the model."""


def check_texts(texts, lang: str, names=None) -> None:
    """Refuse an unsupported language and empty or whitespace-only captions."""
    check_language(lang, "tagger input")
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            name = names[i] if names is not None else f"#{i}"
            raise TaggerError(
                f"caption {name} ({lang}) is empty or whitespace only: {text!r}; fix or drop it"
            )


def tokenize_all(texts, lang: str) -> list[list[str]]:
    """Check captions (:func:`check_texts`) and split them with :func:`rudder.text.tokenize`."""
    from rudder.text import tokenize

    check_texts(texts, lang)
    return [tokenize(text, lang) for text in texts]


def _file_digest(paths, root=None, digest=None) -> str:
    """SHA-256 (16 hex digits) over each file's name (relative to ``root``, else its base
    name) and bytes, read in 1 MiB blocks (official models are hundreds of MB)."""
    digest = digest or hashlib.sha256()
    for path in map(Path, paths):
        digest.update(str(path.relative_to(root) if root else path.name).encode())
        with path.open("rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()[:16]


class StanzaTagger:
    """Stanza's POS tagger and lemmatizer on local models only (``download_method=None``).

    ``folder`` (resolved by :func:`model_dir`) holds either models trained by
    ``python -m heuristics train-tagger`` (``<lang>/pos/default.pt``,
    ``<lang>/lemma/default.pt``, ``<lang>/rudder_tagger.json``) or Stanza's official models
    (``resources.json`` + ``<lang>/...`` from ``python -m heuristics download``). Without a
    lemmatizer (a treebank without lemmas) a word's lemma is its form. Captions
    are fed pretokenised (``tokenize_pretokenized=True``), one sentence per caption. The
    dependency parser runs when the directory has one for the language (official models);
    its relations then drive the particle and light-verb joins.
    """

    def __init__(self, folder=None):
        self.model_dir = model_dir(folder)
        if not self.model_dir.is_dir():
            raise TaggerError(
                f"Stanza model directory {self.model_dir} does not exist; "
                "train models into it with "
                f"`python -m heuristics train-tagger --lang LANG --train X.conllu --dev Y.conllu "
                f"--model-dir {self.model_dir}`, or pass --model-dir (or set STANZA_RESOURCES_DIR) "
                "to where your models are"
            )
        self._pipelines: dict = {}
        self._ids: dict = {}

    def __getstate__(self):  # pipelines are rebuilt in each worker process
        return {**self.__dict__, "_pipelines": {}}

    def _own_paths(self, lang: str) -> dict | None:
        """Model paths of a train-tagger folder (``lemma`` None for an identity lemmatizer)."""
        folder = self.model_dir / lang
        if not (folder / MODEL_INFO).is_file():
            return None
        try:
            info = json.loads((folder / MODEL_INFO).read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise TaggerError(f"{folder / MODEL_INFO}: not valid JSON ({error})") from None
        paths: dict[str, Path | None] = {"pos": folder / "pos" / "default.pt",
                                         "lemma": folder / "lemma" / "default.pt"}
        if info.get("lemmatizer") == "identity":
            paths["lemma"] = None
        for name, path in paths.items():
            if path is not None and not path.is_file():
                raise TaggerError(
                    f"{self.model_dir}: the {name} model of {lang!r} is missing ({path}); "
                    f"retrain with `python -m heuristics train-tagger --lang {lang} ... "
                    f"--model-dir {self.model_dir}`"
                )
        return paths

    def known_lemmas(self, lang: str) -> frozenset:
        """The lemmas of the treebank the lemmatizer was trained on (``<lang>/lemmas.txt``,
        written by ``train-tagger``; empty for other models): what counts as a word for the
        Indic lemma fallback (:func:`heuristics.class_rules.lemma_vocabulary`)."""
        path = self.model_dir / lang / LEMMA_LIST
        if not path.is_file():
            return frozenset()
        return frozenset(path.read_text(encoding="utf-8").split("\n")) - {""}

    def _check_official(self, lang: str) -> None:
        resources = self.model_dir / "resources.json"
        known = {}
        if resources.is_file():
            try:
                known = json.loads(resources.read_text(encoding="utf-8"))
            except json.JSONDecodeError as error:
                raise TaggerError(f"{resources}: not valid JSON ({error})") from None
        folder = self.model_dir / lang
        if (
            lang not in known
            or not any((folder / "pos").glob("*.pt"))
            or not any((folder / "lemma").glob("*.pt"))
        ):
            raise TaggerError(
                f"{self.model_dir}: no Stanza POS/lemma model for {lang!r} "
                f"(expected {folder}/pos/default.pt "
                f"from `python -m heuristics train-tagger --lang {lang} "
                "--train X.conllu --dev Y.conllu "
                f"--model-dir {self.model_dir}`, or official models from "
                f"`python -m heuristics download --lang {lang} "
                f"--model-dir {self.model_dir}`)"
            )

    def _use_parser(self, lang: str) -> bool:
        return any((self.model_dir / lang / "depparse").glob("*.pt"))

    def model_id(self, lang: str) -> str:
        """The SHA-256 of the model files' bytes (train-tagger: ``pos``/``lemma``
        ``default.pt``; official: ``resources.json`` and every ``.pt`` of the language), so
        a model replaced in place never reads stale cached tags. Hashed once per language
        per tagger (about 0.3 s per 300 MB)."""
        check_language(lang, "StanzaTagger")
        if lang not in self._ids:
            own = self._own_paths(lang)
            if own is not None:
                self._ids[lang] = "stanza-own:" + _file_digest(
                    [p for p in own.values() if p is not None]
                )
            else:
                self._check_official(lang)
                resources = hashlib.sha256((self.model_dir / "resources.json").read_bytes())
                models = sorted((self.model_dir / lang).rglob("*.pt"))
                digest = _file_digest(models, self.model_dir, resources)
                self._ids[lang] = f"stanza-official:{digest}:parser={self._use_parser(lang)}"
        return self._ids[lang]

    def _pipeline(self, lang: str):
        if lang in self._pipelines:
            return self._pipelines[lang]
        stanza = require("stanza", "heuristics")

        self.model_id(lang)  # validates the directory
        common = {
            "tokenize_pretokenized": True,
            "download_method": None,
            "logging_level": "ERROR",
            "use_gpu": False,
        }
        own = self._own_paths(lang)
        if own is not None:
            if not (self.model_dir / "resources.json").is_file():
                raise TaggerError(
                    f"{self.model_dir}/resources.json is missing; write '{{}}' into it or retrain"
                )
            none = {
                f"{p}_{d}_path": None
                for p in ("pos", "lemma")
                for d in ("pretrain", "forward_charlm", "backward_charlm")
            }
            paths = {"pos_model_path": str(own["pos"])}
            if own["lemma"] is not None:
                paths["lemma_model_path"] = str(own["lemma"])
            processors = "tokenize,pos" + (",lemma" if own["lemma"] is not None else "")
            pipeline = stanza.Pipeline(
                lang,
                dir=str(self.model_dir),
                processors=processors,
                allow_unknown_language=True,
                **paths,
                **none,
                **common,
            )
        else:
            processors = "tokenize,pos,lemma" + (",depparse" if self._use_parser(lang) else "")
            pipeline = stanza.Pipeline(
                lang, dir=str(self.model_dir), processors=processors, **common
            )
        self._pipelines[lang] = pipeline
        return pipeline

    def tag_tokens(self, token_lists, lang: str) -> list[list[TaggedWord]]:
        token_lists = [list(tokens) for tokens in token_lists]
        out: list[list[TaggedWord]] = [[] for _ in token_lists]  # filled below where todo
        todo = [i for i, t in enumerate(token_lists) if t]
        if not todo:
            return [[] for _ in token_lists]
        pipeline = self._pipeline(lang)
        for start in range(0, len(todo), _STANZA_CHUNK):
            chunk = todo[start : start + _STANZA_CHUNK]
            doc = pipeline([token_lists[i] for i in chunk])
            if len(doc.sentences) != len(chunk):
                raise TaggerError(
                    f"Stanza returned {len(doc.sentences)} sentences for {len(chunk)} captions"
                )
            for i, sentence in zip(chunk, doc.sentences, strict=False):
                out[i] = [
                    TaggedWord(w.text, w.lemma or w.text, w.upos or "X", w.head, w.deprel)
                    for w in sentence.words
                ]
        return out

    def tag(self, texts, lang: str) -> list[list[TaggedWord]]:
        return self.tag_tokens(tokenize_all(texts, lang), lang)


def default_cache_path() -> Path:
    """``$RUDDER_CACHE/tags.sqlite`` (default ``~/.cache/rudder/tags.sqlite``)."""
    return cache_dir("tags.sqlite")


class TagCache:
    """Tagger output on disk: SQLite table ``tags(model, lang, text) -> JSON word list``."""

    def __init__(self, path=None):
        self.path = Path(path) if path is not None else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with self._connect() as db:
                db.execute(
                    "CREATE TABLE IF NOT EXISTS tags (model TEXT, lang TEXT, text TEXT, "
                    "words TEXT, PRIMARY KEY (model, lang, text))"
                )
                db.execute("SELECT model, lang, text, words FROM tags LIMIT 0")
        except sqlite3.DatabaseError as error:
            raise TaggerError(
                f"{self.path}: cannot be used as the tag cache ({error}); delete it, "
                "or pass --no-cache or another --cache file"
            ) from None

    def _connect(self):
        return sqlite3.connect(self.path, timeout=30)

    def get_many(self, model: str, lang: str, texts) -> dict[str, list[TaggedWord]]:
        texts, found = list(texts), {}
        with self._connect() as db:
            for start in range(0, len(texts), 500):
                chunk = texts[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = db.execute(
                    f"SELECT text, words FROM tags WHERE model=? AND lang=? AND text IN ({marks})",
                    [model, lang, *chunk],
                )
                for text, words in rows:
                    found[text] = [TaggedWord.from_list(w) for w in json.loads(words)]
        return found

    def put_many(self, model: str, lang: str, tagged: dict) -> None:
        rows = [
            (model, lang, text, json.dumps([w.to_list() for w in words], ensure_ascii=False))
            for text, words in tagged.items()
        ]
        with self._connect() as db:
            db.executemany("INSERT OR REPLACE INTO tags VALUES (?, ?, ?, ?)", rows)


class _TagBatch:
    """``datasets.map`` function: tags a batch of texts, returns JSON word lists."""

    def __init__(self, tagger, lang: str):
        self.tagger, self.lang = tagger, lang

    def __call__(self, batch):
        tagged = self.tagger.tag(batch["text"], self.lang)
        return {
            "words": [
                json.dumps([w.to_list() for w in words], ensure_ascii=False) for words in tagged
            ]
        }


def tag_texts(
    tagger,
    texts,
    lang: str,
    cache: TagCache | None = None,
    num_proc: int = 1,
    batch_size: int = 256,
) -> list[list[TaggedWord]]:
    """Tag ``texts`` (one language) in bulk: each distinct text once, cached ones read back.

    Uncached texts go to ``tagger.tag`` ``batch_size`` at a time (a progress bar on a
    terminal), or with ``num_proc > 1`` through
    ``datasets.Dataset.map(batched=True, num_proc=num_proc)`` (each worker builds its own
    Stanza pipeline). New results are written to ``cache``.
    """
    texts = list(texts)
    check_texts(texts, lang)
    unique = list(dict.fromkeys(texts))
    model = tagger.model_id(lang)
    found = cache.get_many(model, lang, unique) if cache is not None else {}
    missing = [text for text in unique if text not in found]
    if missing:
        if num_proc > 1 and len(missing) > batch_size:
            import datasets

            table = datasets.Dataset.from_dict({"text": missing})
            mapped = table.map(
                _TagBatch(tagger, lang), batched=True, batch_size=batch_size, num_proc=num_proc
            )
            new = {
                t: [TaggedWord.from_list(w) for w in json.loads(j)]
                for t, j in zip(missing, mapped["words"], strict=False)
            }
        else:
            new = {}
            with progress(total=len(missing), desc=f"tagging {lang}", unit="text") as bar:
                for start in range(0, len(missing), batch_size):
                    part = missing[start : start + batch_size]
                    new.update(zip(part, tagger.tag(part, lang), strict=False))
                    bar.update(len(part))
        if cache is not None:
            cache.put_many(model, lang, new)
        found.update(new)
    return [found[text] for text in texts]
