"""Train Stanza POS and lemmatizer models offline with Stanza's own trainers.

``stanza.models.tagger`` and ``stanza.models.lemmatizer`` run in-process on treebanks
converted to what the Stanza tagger sees at labelling time (:func:`prepare_treebank`):
surface tokens of :func:`rudder.text.tokenize`, normalised lemmas, no XPOS/features (not
used here, and the feature head slows training). No pretrained vectors or character LMs
(``--no_pretrain``), so nothing is downloaded. The output directory holds
``resources.json`` (``{}`` when absent) and ``<lang>/pos/default.pt``,
``<lang>/lemma/default.pt``, ``<lang>/rudder_tagger.json`` (data, options, wall-clock
and CPU seconds of training), ``<lang>/lemmas.txt`` (the training lemmas, one a line: the
words of the Indic lemma fallback, :mod:`heuristics.indic_rules`). A treebank without
lemmas (all ``_``, as te_mtg) trains no lemmatizer; the tagger then uses the word form as
its lemma (``"lemmatizer": "identity"``), which :class:`heuristics.taggers.StanzaTagger`
loads. The language folder is built in a staging folder beside it
(:func:`rudder.atomic.staged_folder`) and renamed into place: a failed, interrupted or
killed run leaves nothing. Progress (Stanza's step, loss and dev-score lines) goes to stderr
unless ``progress=False``; ``verbose=True`` shows Stanza's whole log.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from rudder.atomic import staged_folder, swap_into_place
from rudder.languages import check_language
from rudder.optional import require

from .conllu import read_conllu, surface_sentence, write_conllu
from .nouns_verbs import normalise
from .taggers import LEMMA_LIST, MODEL_INFO

# Network sizes: "tiny" for tests (seconds), "small" the default (minutes on 2 shared
# cores); Stanza's defaults are larger still (hidden 200, char hidden 400).
SIZES = {
    "tiny": {
        "word_emb_dim": 16,
        "char_emb_dim": 16,
        "char_hidden_dim": 32,
        "hidden_dim": 32,
        "deep_biaff_hidden_dim": 32,
        "composite_deep_biaff_hidden_dim": 16,
        "tag_emb_dim": 8,
        "lemma_hidden_dim": 32,
        "lemma_emb_dim": 16,
    },
    "small": {
        "word_emb_dim": 50,
        "char_emb_dim": 50,
        "char_hidden_dim": 100,
        "hidden_dim": 100,
        "deep_biaff_hidden_dim": 100,
        "composite_deep_biaff_hidden_dim": 50,
        "tag_emb_dim": 25,
        "lemma_hidden_dim": 100,
        "lemma_emb_dim": 50,
    },
}


class TrainingError(RuntimeError):
    """Stanza's trainers did not produce a model."""


@dataclass
class TrainOptions:
    """Training length and size.

    The tagger runs ``max_steps`` updates of ``batch_size`` sentences (the best one on the dev
    file, scored every ``eval_interval`` steps, is kept). Stanza's lemmatizer counts epochs;
    for the same budget on small and large treebanks it gets
    ``ceil(lemma_steps * lemma_batch_size / training words)`` epochs (``lemma_batch_size``
    counts words). The defaults train English on 2,000 EWT sentences in 4 CPU minutes (8
    minutes wall on 2 cores shared with other jobs); Stanza logs the loss every ``log_step``
    steps. Torch runs ``threads`` threads: these small networks gain nothing from more, and on
    busy shared cores two threads made a step take 4 s instead of 0.1-0.3 s.
    """

    size: str = "small"
    max_steps: int = 1200
    batch_size: int = 32
    eval_interval: int = 200
    lemma_steps: int = 1000
    lemma_batch_size: int = 50
    log_step: int = 50
    threads: int = 1
    seed: int = 1234

    def __post_init__(self):
        if self.size not in SIZES:
            raise ValueError(f"size must be one of {sorted(SIZES)}, got {self.size!r}")
        if min(self.max_steps, self.lemma_steps, self.batch_size, self.lemma_batch_size) < 1:
            raise ValueError("max_steps, lemma_steps and the batch sizes must be positive")
        if min(self.eval_interval, self.log_step, self.threads) < 1:
            raise ValueError("eval_interval, log_step and threads must be positive")

    def lemma_epochs(self, words: int) -> int:
        return max(1, -(-self.lemma_steps * self.lemma_batch_size // max(words, 1)))


def prepare_treebank(sentences, lang: str) -> list:
    """Sentences as the tagger sees them: surface tokens of rudder's tokeniser (see
    :func:`heuristics.conllu.surface_sentence`), lemmas normalised, XPOS/FEATS/DEPS/MISC
    blanked; sentences left without words (only punctuation) are dropped."""
    from rudder.text import tokenize

    check_language(lang, "prepare_treebank")
    out = []
    for sentence in sentences:
        surface = surface_sentence(
            sentence, lambda form: tokenize(form, lang), lambda lemma: normalise(lemma, lang)
        )
        if surface.words:
            surface.words = [
                replace(w, xpos="_", feats="_", deps="_", misc="_") for w in surface.words
            ]
            out.append(surface)
    return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# Stanza's progress lines: tagger "Finished STEP 50/1200, loss = ..." and "step 200: ...
# dev_score = ...", lemmatizer "step 50/445 (epoch 1/3), loss = ...", "Dev F1 = ...".
_PROGRESS = re.compile(r"STEP \d+/\d+|step \d+/\d+|dev_score|Dev F1|Best dev")


def _progress_only(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR or bool(_PROGRESS.search(record.getMessage()))


@contextmanager
def _stanza_log(verbose: bool, progress: bool, level: int):
    """Stanza's whole log (``verbose``), only its progress and errors on stderr (``progress``),
    or only errors, while the trainers run; then the logger is back as it was, at ``level``
    (importing Stanza's trainers sets it to DEBUG)."""
    logger = logging.getLogger("stanza")
    saved = level, logger.propagate, list(logger.handlers)
    logger.setLevel(logging.INFO if verbose or progress else logging.ERROR)
    if not verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        handler.addFilter(_progress_only)
        logger.handlers, logger.propagate = [handler], False
    try:
        yield
    finally:
        logger.setLevel(saved[0])
        logger.propagate, logger.handlers = saved[1], saved[2]


def _say(progress: bool, message: str) -> None:
    if progress:
        print(message, file=sys.stderr, flush=True)


def _tagger_args(lang, train, dev, save_dir, options: TrainOptions) -> list[str]:
    size = SIZES[options.size]
    args = [
        "--no_pretrain",
        "--train_file",
        str(train),
        "--eval_file",
        str(dev),
        "--lang",
        lang,
        "--shorthand",
        f"{lang}_rudder",
        "--save_dir",
        str(save_dir),
        "--save_name",
        "default.pt",
        "--max_steps",
        str(options.max_steps),
        "--batch_size",
        str(options.batch_size),
        "--eval_interval",
        str(min(options.eval_interval, options.max_steps)),
        "--fix_eval_interval",
        "--log_step",
        str(options.log_step),
        "--seed",
        str(options.seed),
        "--cpu",
    ]
    for key in (
        "word_emb_dim",
        "char_emb_dim",
        "char_hidden_dim",
        "hidden_dim",
        "deep_biaff_hidden_dim",
        "composite_deep_biaff_hidden_dim",
        "tag_emb_dim",
    ):
        args += [f"--{key}", str(size[key])]
    return args


def _lemma_args(lang, train, dev, save_dir, options: TrainOptions, words: int) -> list[str]:
    size = SIZES[options.size]
    return [
        "--train_file",
        str(train),
        "--eval_file",
        str(dev),
        "--shorthand",
        f"{lang}_rudder",
        "--save_dir",
        str(save_dir),
        "--save_name",
        "default.pt",
        "--num_epoch",
        str(options.lemma_epochs(words)),
        "--batch_size",
        str(options.lemma_batch_size),
        "--log_step",
        str(options.log_step),
        "--hidden_dim",
        str(size["lemma_hidden_dim"]),
        "--emb_dim",
        str(size["lemma_emb_dim"]),
        "--pos_dim",
        str(size["lemma_emb_dim"]),
        "--seed",
        str(options.seed),
        "--cpu",
    ]


def _dataset_info(path: Path, sentences) -> dict:
    return {
        "path": str(path),
        "sha256": _sha256(path),
        "sentences": len(sentences),
        "words": sum(len(s.words) for s in sentences),
    }


def train_tagger(
    lang: str,
    train_path,
    dev_path,
    out_dir,
    options: TrainOptions | None = None,
    verbose: bool = False,
    progress: bool = True,
) -> dict:
    """Train POS + lemmatizer for ``lang`` into ``out_dir/<lang>``; returns the info record."""
    level = logging.getLogger("stanza").level
    stanza = require("stanza", "heuristics")
    import torch
    from stanza.models import lemmatizer as stanza_lemmatizer
    from stanza.models import tagger as stanza_tagger

    check_language(lang, "train-tagger --lang")
    options = options or TrainOptions()
    train_path, dev_path, out_dir = Path(train_path), Path(dev_path), Path(out_dir)
    train = prepare_treebank(read_conllu(train_path), lang)
    dev = prepare_treebank(read_conllu(dev_path), lang)
    if not train or not dev:
        raise TrainingError(
            f"no words left in {train_path if not train else dev_path} after tokenisation"
        )
    if all(w.upos == "_" for s in train for w in s.words):
        raise TrainingError(
            f"{train_path}: no UPOS tags (column 4 is '_' on every word); the POS tagger "
            "learns from them, so use a treebank that has them"
        )
    # A treebank without lemmas (te_mtg) gets no lemmatizer: lemmas are then the word forms.
    has_lemmas = any(w.lemma not in ("_", "") for s in train for w in s.words)
    train_words = sum(len(s.words) for s in train)
    threads = torch.get_num_threads()
    torch.set_num_threads(options.threads)
    try:
        with _stanza_log(verbose, progress, level), staged_folder(out_dir / lang) as stage:
            data = stage / "data"
            write_conllu(train, data / "train.conllu")
            write_conllu(dev, data / "dev.conllu")
            _say(
                progress,
                f"[{lang}] POS tagger: {len(train)} training sentences, {options.max_steps} steps "
                f"of {options.batch_size}, dev score every {options.eval_interval} steps "
                f"(best kept), staging in {stage}",
            )
            start, cpu = time.perf_counter(), time.process_time()
            stanza_tagger.main(
                _tagger_args(
                    lang, data / "train.conllu", data / "dev.conllu", stage / "pos", options
                )
            )
            pos_seconds, pos_cpu = time.perf_counter() - start, time.process_time() - cpu
            lemma_seconds = lemma_cpu = 0.0
            if has_lemmas:
                _say(
                    progress,
                    f"[{lang}] lemmatizer: {options.lemma_epochs(train_words)} epochs over "
                    f"{train_words} words (POS took {pos_seconds:.0f} s)",
                )
                start, cpu = time.perf_counter(), time.process_time()
                stanza_lemmatizer.main(
                    _lemma_args(
                        lang,
                        data / "train.conllu",
                        data / "dev.conllu",
                        stage / "lemma",
                        options,
                        train_words,
                    )
                )
                lemma_seconds, lemma_cpu = time.perf_counter() - start, time.process_time() - cpu
            for name in ("pos", "lemma") if has_lemmas else ("pos",):
                if not (stage / name / "default.pt").is_file():
                    raise TrainingError(
                        f"Stanza's {name} trainer wrote no model (see its log with --verbose)"
                    )
            info = {
                "lang": lang,
                "stanza_version": stanza.__version__,
                "options": asdict(options),
                "lemmatizer": "stanza" if has_lemmas else "identity",
                "lemma_epochs": options.lemma_epochs(train_words) if has_lemmas else 0,
                "train": _dataset_info(train_path, train),
                "dev": _dataset_info(dev_path, dev),
                "seconds": {"pos": round(pos_seconds, 1), "lemma": round(lemma_seconds, 1)},
                "cpu_seconds": {"pos": round(pos_cpu, 1), "lemma": round(lemma_cpu, 1)},
            }
            shutil.rmtree(data)
            if has_lemmas:  # what counts as a word for the Indic lemma fallback
                lemmas = sorted({w.lemma for s in train for w in s.words} - {"_", ""})
                (stage / LEMMA_LIST).write_text("\n".join(lemmas) + "\n", encoding="utf-8")
            (stage / MODEL_INFO).write_text(
                json.dumps(info, indent=2, ensure_ascii=False), encoding="utf-8"
            )
            swap_into_place(stage, out_dir / lang)
        resources = out_dir / "resources.json"
        if not resources.exists():
            resources.write_text("{}\n", encoding="utf-8")
        return info
    finally:
        torch.set_num_threads(threads)
