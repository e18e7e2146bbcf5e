"""A small five-language dataset, a randomly initialised model and a served app.

The app is built from model objects directly (no run directory, no training), so these
tests depend only on the model code and the dataset layout.
"""

import shutil
import socket

import numpy as np
import pytest
import torch

import app  # noqa: F401  (turns analytics off before gradio is imported)
from rudder.data.card import Card
from rudder.data.layout import DatasetFolder, ExpertInfo

from ..factories import caption, write_dataset

# concept id -> (mr, hi, ta, te, en)
NOUNS = {
    "n:paper": ("कागद", "कागज़", "காகிதம்", "కాగితం", "paper"),
    "n:boat": ("होडी", "नाव", "படகு", "పడవ", "boat"),
    "n:bottle": ("बाटली", "बोतल", "பாட்டில்", "సీసా", "bottle"),
    "n:clay": ("माती", "मिट्टी", "களிமண்", "మట్టి", "clay"),
    "n:car": ("गाडी", "गाड़ी", "கார்", "కారు", "car"),
}
VERBS = {
    "v:fold": ("दुमडा", "मोड़ें", "மடியுங்கள்", "మడవండి", "fold"),
    "v:cut": ("कापा", "काटें", "வெட்டுங்கள்", "కత్తిరించండి", "cut"),
    "v:paint": ("रंगवा", "रंगें", "வரையுங்கள்", "రంగు వేయండి", "paint"),
}
LANGS = ("mr", "hi", "ta", "te", "en")
SCRIPT_CAPTION = (
    "<script>window.__pwned = 1</script> fold the <b>paper</b> & <img src=x onerror=alert(1)>"
)
SCRIPT_VIDEO = "v007"
EXPERTS = {"scene": ExpertInfo(16), "object": ExpertInfo(8), "audio@mr": ExpertInfo(6, True)}


def caption_text(noun: str, verb: str, lang: str) -> str:
    n, v = NOUNS[noun][LANGS.index(lang)], VERBS[verb][LANGS.index(lang)]
    return f"{v} the {n}" if lang == "en" else f"{n} {v}"


def build_app_dataset(path, num_videos: int = 30, seed: int = 0):
    """Videos with one noun and one verb each; captions in all five languages."""
    rng = np.random.default_rng(seed)
    video_ids = [f"v{i:03d}" for i in range(num_videos)]
    splits = ["train"] * (num_videos - 12) + ["validation"] * 6 + ["test"] * 6
    nouns, verbs = list(NOUNS), list(VERBS)
    rows = []
    for i, vid in enumerate(video_ids):
        noun, verb = nouns[i % len(nouns)], verbs[(i // len(nouns)) % len(verbs)]
        for lang in LANGS:
            text = (
                SCRIPT_CAPTION
                if (vid == SCRIPT_VIDEO and lang == "en")
                else caption_text(noun, verb, lang)
            )
            rows.append(
                caption(
                    f"{vid}-{lang}",
                    vid,
                    lang,
                    text,
                    start=float(i % 4),
                    end=float(i % 4) + 3.5,
                    machine_translated=lang in ("ta", "te"),
                    nouns=[NOUNS[noun][LANGS.index(lang)]],
                    verbs=[VERBS[verb][LANGS.index(lang)]],
                    noun_classes=[noun],
                    verb_classes=[verb],
                )
            )
    audio_ids = [v for i, v in enumerate(video_ids) if i % 3 != 0]
    features = {
        "scene": (EXPERTS["scene"], video_ids, rng.normal(size=(num_videos, 16))),
        "object": (EXPERTS["object"], video_ids, rng.normal(size=(num_videos, 8))),
        "audio@mr": (
            EXPERTS["audio@mr"],
            audio_ids,
            [rng.normal(size=(2 + j % 3, 6)) for j in range(len(audio_ids))],
        ),
    }
    card = Card("App test", "Five-language test dataset for the app.")
    write_dataset(
        path,
        dict(zip(video_ids, splits, strict=True)),
        rows,
        features,
        languages=LANGS,
        name="app-test",
        card=card,
    )
    return DatasetFolder(path)


def random_model(folder: DatasetFolder, seed: int = 0, langs=LANGS):
    """A randomly initialised small CollaborativeExperts and the vocabulary of the dataset's
    training captions in ``langs``."""
    from rudder.data.loader import build_vocabulary
    from rudder.models import CollaborativeExperts, ModelConfig

    torch.manual_seed(seed)
    vocab = build_vocabulary(folder, langs)
    config = ModelConfig(shared_dim=32, word_dim=16, text_vlad_clusters=4, video_vlad_clusters=2)
    return CollaborativeExperts(config, folder.meta.experts, len(vocab)).eval(), vocab


def build_segment_dataset(path, num_videos: int = 12):
    """Videos with two segments each, captioned in Marathi and English (aligned: the same
    start and end) and in Hindi for the first segment only.

    Video ``i``: segment 0 (0-5 s) folds noun ``i % 5``, segment 1 (5-10 s) cuts or paints
    noun ``(i + 2) % 5``.
    """
    langs = ("mr", "hi", "en")
    video_ids = [f"s{i:02d}" for i in range(num_videos)]
    nouns, verbs = list(NOUNS), list(VERBS)
    rows = []
    for i, vid in enumerate(video_ids):
        segments = [(nouns[i % 5], "v:fold"), (nouns[(i + 2) % 5], verbs[1 + i % 2])]
        for s, (noun, verb) in enumerate(segments):
            for lang in langs if s == 0 else ("mr", "en"):
                rows.append(
                    caption(
                        f"{vid}-{lang}-{s}",
                        vid,
                        lang,
                        caption_text(noun, verb, lang),
                        start=5.0 * s,
                        end=5.0 * s + 5.0,
                        kind="describing",
                    )
                )
    splits = ["train"] * (num_videos - 4) + ["validation"] * 2 + ["test"] * 2
    rng = np.random.default_rng(1)
    features = {"scene": (ExpertInfo(16), video_ids, rng.normal(size=(num_videos, 16)))}
    card = Card("Segments", "Two aligned segments per video.")
    write_dataset(
        path,
        dict(zip(video_ids, splits, strict=True)),
        rows,
        features,
        languages=langs,
        name="segments",
        card=card,
    )
    return DatasetFolder(path)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def port():
    """A function returning a free local port."""
    return free_port


@pytest.fixture(scope="session")
def script_caption() -> tuple[str, str]:
    """(caption id, text) of the caption that carries HTML and a script."""
    return f"{SCRIPT_VIDEO}-en", SCRIPT_CAPTION


@pytest.fixture(scope="session")
def app_dataset(tmp_path_factory) -> DatasetFolder:
    return build_app_dataset(tmp_path_factory.mktemp("app-data") / "app-test")


@pytest.fixture(scope="session")
def model_and_vocab(app_dataset):
    return random_model(app_dataset)


@pytest.fixture(scope="session")
def trilingual_model(app_dataset):
    """A random model whose vocabulary holds only the Marathi, Hindi and English captions."""
    return random_model(app_dataset, langs=("mr", "hi", "en"))


@pytest.fixture(scope="session")
def segment_dataset(tmp_path_factory) -> DatasetFolder:
    return build_segment_dataset(tmp_path_factory.mktemp("segments") / "segments")


@pytest.fixture(scope="session")
def segment_model(segment_dataset):
    return random_model(segment_dataset, langs=("mr", "hi", "en"))


@pytest.fixture(scope="session")
def media_dir(tmp_path_factory):
    """Tiny real videos (PyAV) for every video but v002 (none) and v004 (a broken file), and
    a secret beside the folder."""
    from .videos import write_video

    root = tmp_path_factory.mktemp("media-root")
    media = root / "media"
    media.mkdir()
    for i in range(30):
        if i not in (2, 4):
            write_video(media / f"v{i:03d}.mp4")
    (media / "v004.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42 not a video")
    (root / "secret.txt").write_text("not to be served")
    return media


class FakeTranslator:
    """Stands in for Google Translate: answers texts it knows, acts offline for the rest."""

    def __init__(self, table):
        self.table, self.calls = dict(table), []

    def __call__(self, text, src, dest):
        from rudder.translate import TranslationUnavailable

        self.calls.append((text, src, dest))
        if text not in self.table:
            raise TranslationUnavailable("cannot reach Google Translate (test: offline)")
        return self.table[text]


@pytest.fixture(scope="session")
def translator():
    return FakeTranslator({"कागद दुमडा": "fold the paper"})


@pytest.fixture(scope="session")
def served(tmp_path_factory, app_dataset, model_and_vocab, media_dir, translator):
    """The app built from the random model, served on a free port: yields (url, db path, demo)."""
    from app.ui import build_app, launch_app

    tmp = tmp_path_factory.mktemp("served")
    model, vocab = model_and_vocab
    demo = build_app(
        model,
        vocab,
        app_dataset,
        db_path=tmp / "labels.sqlite",
        runs_dir=tmp / "runs",
        media_dir=media_dir,
        cache_dir=tmp / "index",
        translator=translator,
        thumbnail_dir=tmp / "thumbnails",
        description="Collaborative Experts with the random loss (test)",
    )
    launch_app(demo, port=free_port(), prevent_thread_lock=True, quiet=True)
    yield demo.local_url, tmp / "labels.sqlite", demo
    demo.close()


@pytest.fixture(scope="session")
def client(served):
    from gradio_client import Client

    return Client(served[0], verbose=False, analytics_enabled=False)


@pytest.fixture(scope="session")
def concept(tmp_path_factory):
    """The learnable toy dataset of tests/factories.py (name ``tiny``; mr and en captions)."""
    from ..factories import concept_dataset

    return concept_dataset(tmp_path_factory.mktemp("concept") / "tiny")


@pytest.fixture(scope="session")
def base_run(concept, tmp_path_factory):
    """A small run trained on ``concept`` (2 epochs, a few seconds): what a retrain starts
    from."""
    from rudder import train

    out = tmp_path_factory.mktemp("runs") / "base"
    train.main(["--dataset", str(concept), "--output-dir", str(out), "--epochs", "2",
                "--set", "data.batch_size=8", "--set", "model.shared_dim=16",
                "--set", "model.word_dim=8", "--set", "model.text_vlad_clusters=2",
                "--set", "model.video_vlad_clusters=2", "--set", "data.caption_langs=[mr, en]",
                "--set", "data.audio_langs=[mr]"])
    return out


# The browser tests (``-m browser``): Debian's Chromium, driven by Playwright, one browser per
# test module.
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser():
    if not shutil.which(CHROMIUM):
        pytest.skip(f"{CHROMIUM} not found: run scripts/install_browser_deps.sh")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()
