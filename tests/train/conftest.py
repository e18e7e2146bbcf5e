"""A tiny dataset in the real layout, so training tests run in seconds."""

import numpy as np
import pyarrow as pa
import pytest

from rudder.data.card import Card
from rudder.data.layout import DatasetMeta, ExpertInfo
from rudder.data.layout_writer import DatasetWriter

NOUNS = {"n:bottle": ("bottle", "बाटली"), "n:straw": ("straw", "स्ट्रॉ"), "n:magnet": ("magnet", "चुंबक"),
         "n:card": ("card", "कार्ड"), "n:balloon": ("balloon", "फुगा"), "n:thread": ("thread", "दोरा")}
VERBS = {"v:cut": ("cut", "कापा"), "v:glue": ("glue", "चिकटवा"), "v:tie": ("tie", "बांधा")}


def build_tiny_dataset(path, num_videos=48, seed=0):
    """Videos with 2 materials and 1 action each; features are noisy codes of them."""
    rng = np.random.default_rng(seed)
    nouns, verbs = list(NOUNS), list(VERBS)
    projection = {"object": rng.normal(size=(len(nouns) + len(verbs), 16)),
                  "audio@mr": rng.normal(size=(len(nouns) + len(verbs), 8))}
    meta = DatasetMeta("tiny", "1", ["mr", "en"], {"object": ExpertInfo(16), "audio@mr": ExpertInfo(8, True)})
    video_ids = [f"v{i:03d}" for i in range(num_videos)]
    splits = np.array(["train"] * num_videos, dtype=object)
    splits[num_videos * 6 // 10 : num_videos * 8 // 10] = "validation"
    splits[num_videos * 8 // 10 :] = "test"
    rows, codes, has_audio = [], [], []
    for i, vid in enumerate(video_ids):
        chosen_n = rng.choice(len(nouns), 2, replace=False)
        chosen_v = rng.choice(len(verbs), 1)
        code = np.zeros(len(nouns) + len(verbs))
        code[chosen_n] = 1
        code[len(nouns) + chosen_v] = 1
        codes.append(code)
        has_audio.append(i % 3 != 0)
        for lang, col in (("en", 0), ("mr", 1)):
            n_words = [NOUNS[nouns[j]][col] for j in chosen_n]
            v_word = VERBS[verbs[chosen_v[0]]][col]
            text = f"{v_word} the {n_words[0]} and {n_words[1]}" if lang == "en" else f"{n_words[0]} आणि {n_words[1]} {v_word}"
            rows.append({"caption_id": f"{vid}-{lang}", "video_id": vid, "lang": lang, "text": text,
                         "start": 0.0, "end": 5.0, "kind": "describing", "machine_translated": False,
                         "nouns": n_words, "verbs": [v_word],
                         "noun_classes": [nouns[j] for j in chosen_n], "verb_classes": [verbs[chosen_v[0]]]})
    codes = np.array(codes)
    with DatasetWriter(path, meta, Card("Tiny", "Tiny synthetic test dataset.")) as writer:
        writer.write_videos(pa.table({
            "video_id": video_ids, "duration": [10.0] * num_videos, "split": list(splits),
            "experts": [["object", "audio@mr"] if a else ["object"] for a in has_audio]}))
        writer.write_captions(pa.Table.from_pylist(rows))
        writer.write_expert("object", [(video_ids, codes @ projection["object"] + 0.3 * rng.normal(size=(num_videos, 16)))])
        audio_ids = [v for v, a in zip(video_ids, has_audio) if a]
        audio = [np.tile(codes[i] @ projection["audio@mr"], (3, 1)) + 0.3 * rng.normal(size=(3, 8))
                 for i, a in enumerate(has_audio) if a]
        writer.write_expert("audio@mr", [(audio_ids, audio)])
    return path


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory):
    return build_tiny_dataset(tmp_path_factory.mktemp("data") / "tiny")


@pytest.fixture
def fast_args():
    """CLI flags that make a training run take a second or two."""
    return ["--epochs", "2", "--set", "data.batch_size=8", "--set", "model.shared_dim=16",
            "--set", "model.word_dim=8", "--set", "model.text_vlad_clusters=2",
            "--set", "model.video_vlad_clusters=2", "--set", "data.caption_langs=[mr, en]",
            "--set", "data.audio_langs=[mr]"]


@pytest.fixture
def train_tiny(tiny_dataset, fast_args):
    """``train_tiny(out_dir, *flags)``: rudder.train.main on the tiny dataset, fast settings."""
    from rudder import train

    def run(out, *extra):
        return train.main(["--dataset", str(tiny_dataset), "--output-dir", str(out), *fast_args, *extra])

    return run
