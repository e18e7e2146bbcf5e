"""Fixtures for the heuristics tests: a tiny lexicon, a tiny dataset, a tiny CoNLL-U corpus."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from rudder.data.card import Card
from rudder.data.layout import ExpertInfo

from ..factories import caption, write_dataset

LEXICON = """concept_id\tpos\tlang\tlemma
n:paper\tnoun\ten\tpaper
n:paper\tnoun\thi\tकागज़
n:card\tnoun\ten\tcard
n:bottle\tnoun\ten\tbottle
v:cut\tverb\ten\tcut
v:cut\tverb\thi\tकाटना
v:fold\tverb\ten\tfold
"""

# caption_id, video_id, lang, text
CAPTIONS = [
    ("c1", "v1", "en", "Cut the paper."),
    ("c2", "v1", "hi", "कागज़ काटिए।"),
    ("c3", "v2", "en", "Fold the paper and the card."),
    ("c4", "v3", "en", "Take a bottle."),
    ("c5", "v4", "en", "Cut the card."),
    ("c6", "v5", "en", "Fold it."),
]
SPLIT = {"v1": "train", "v2": "train", "v3": "train", "v4": "test", "v5": "test"}


def build_dataset(root, captions=CAPTIONS, extra_columns=None):
    """Write a tiny dataset (one 4-d ``scene`` expert) with ``captions``; ``extra_columns``
    maps a column name to its values, one per caption."""
    extra = {
        k: v.to_pylist() if isinstance(v, pa.Array) else list(v)
        for k, v in (extra_columns or {}).items()
    }
    rows = [
        caption(cid, vid, lang, text, **{k: values[i] for k, values in extra.items()})
        for i, (cid, vid, lang, text) in enumerate(captions)
    ]
    videos = sorted(SPLIT)
    features = {"scene": (ExpertInfo(4), videos, np.eye(len(videos), 4, dtype=np.float32))}
    card = Card(pretty_name="tiny", description="tiny test dataset")
    return write_dataset(
        root,
        {v: SPLIT[v] for v in videos},
        rows,
        features,
        languages=["en", "hi"],
        version="1.0",
        card=card,
    )


@pytest.fixture
def lexicon_path(tmp_path):
    path = tmp_path / "lexicon.tsv"
    path.write_text(LEXICON, encoding="utf-8")
    return path


@pytest.fixture
def tiny_dataset(tmp_path):
    return build_dataset(tmp_path / "tiny")


def _sentence(sid: int, words) -> str:
    """A CoNLL-U sentence; ``words`` are (form, lemma, upos, head, deprel)."""
    lines = [f"# sent_id = {sid}", "# text = " + " ".join(w[0] for w in words)]
    lines += [
        f"{i}\t{f}\t{l}\t{u}\t_\t_\t{h}\t{d}\t_\t_"
        for i, (f, l, u, h, d) in enumerate(words, start=1)
    ]
    return "\n".join(lines) + "\n\n"


def tiny_corpus(count: int, offset: int = 0) -> str:
    """A synthetic English treebank: imperative toy-making sentences with gold tags."""
    verbs = [
        ("cut", "cut"),
        ("cutting", "cut"),
        ("fold", "fold"),
        ("folded", "fold"),
        ("take", "take"),
    ]
    nouns = [("paper", "paper"), ("cards", "card"), ("bottle", "bottle"), ("straws", "straw")]
    text = []
    for k in range(offset, offset + count):
        verb, noun = verbs[k % len(verbs)], nouns[(k // len(verbs)) % len(nouns)]
        words = [
            (verb[0], verb[1], "VERB", 0, "root"),
            ("the", "the", "DET", 3, "det"),
            (noun[0], noun[1], "NOUN", 1, "obj"),
            (".", ".", "PUNCT", 1, "punct"),
        ]
        text.append(_sentence(k, words))
    return "".join(text)


@pytest.fixture(scope="session")
def tiny_treebank(tmp_path_factory):
    folder = tmp_path_factory.mktemp("treebank")
    (folder / "train.conllu").write_text(tiny_corpus(40), encoding="utf-8")
    (folder / "dev.conllu").write_text(tiny_corpus(10, offset=40), encoding="utf-8")
    return folder


def start_slowed(module: str, function: str, marker, argv, seconds: float = 2.0):
    """Start ``python -m heuristics *argv`` in another process whose ``module.function`` first
    touches ``marker``, then sleeps ``seconds`` (a slow writer); returns once it is inside."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    script = (
        f"import sys, time, pathlib, {module} as m\n"
        f"original = m.{function}\n"
        "def slowed(*args, **kwargs):\n"
        f"    pathlib.Path({str(marker)!r}).touch()\n"
        f"    time.sleep({seconds})\n"
        "    return original(*args, **kwargs)\n"
        f"m.{function} = slowed\n"
        "from heuristics.__main__ import main\n"
        "raise SystemExit(main(sys.argv[1:]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-c", script, *map(str, argv)],
        env=env,
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not Path(marker).exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"the slowed writer did not start: {process.communicate()}")
        time.sleep(0.05)
    return process
