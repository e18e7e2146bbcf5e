"""A tiny labelled dataset (with manual relations) and a tiny suite: runner tests in seconds."""

import numpy as np
import pyarrow as pa
import pytest
import yaml

from rudder.data.card import Card
from rudder.data.layout import DatasetMeta, ExpertInfo
from rudder.data.layout_writer import DatasetWriter

NOUNS = {
    "n:bottle": ("bottle", "बाटली"),
    "n:straw": ("straw", "स्ट्रॉ"),
    "n:magnet": ("magnet", "चुंबक"),
    "n:card": ("card", "कार्ड"),
    "n:balloon": ("balloon", "फुगा"),
}
VERBS = {"v:cut": ("cut", "कापा"), "v:glue": ("glue", "चिकटवा")}


def build_tiny_dataset(path, num_videos=30, seed=0):
    """Videos with 2 materials and 1 action, mr and en captions, noisy feature codes, relations."""
    rng = np.random.default_rng(seed)
    nouns, verbs = list(NOUNS), list(VERBS)
    dim = len(nouns) + len(verbs)
    meta = DatasetMeta(
        "tiny", "1", ["mr", "en"], {"object": ExpertInfo(8), "audio@mr": ExpertInfo(4, True)}
    )
    ids = [f"v{i:02d}" for i in range(num_videos)]
    split = ["train"] * 18 + ["validation"] * 4 + ["test"] * (num_videos - 22)
    rows, codes = [], np.zeros((num_videos, dim))
    for i, vid in enumerate(ids):
        n = rng.choice(len(nouns), 2, replace=False)
        v = int(rng.integers(len(verbs)))
        codes[i, n] = 1
        codes[i, len(nouns) + v] = 1
        for lang, col in (("en", 0), ("mr", 1)):
            words = [NOUNS[nouns[j]][col] for j in n]
            verb = VERBS[verbs[v]][col]
            rows.append(
                {
                    "caption_id": f"{vid}-{lang}",
                    "video_id": vid,
                    "lang": lang,
                    "text": f"{verb} {words[0]} {words[1]}",
                    "start": 0.0,
                    "end": 5.0,
                    "kind": "describing",
                    "machine_translated": False,
                    "nouns": words,
                    "verbs": [verb],
                    "noun_classes": [nouns[j] for j in n],
                    "verb_classes": [verbs[v]],
                }
            )
    with DatasetWriter(path, meta, Card("Tiny", "Tiny synthetic test dataset.")) as writer:
        writer.write_videos(
            pa.table(
                {
                    "video_id": ids,
                    "duration": [10.0] * num_videos,
                    "split": split,
                    "experts": [["object", "audio@mr"]] * num_videos,
                }
            )
        )
        writer.write_captions(pa.Table.from_pylist(rows))
        writer.write_expert(
            "object",
            [(ids, codes @ rng.normal(size=(dim, 8)) + 0.3 * rng.normal(size=(num_videos, 8)))],
        )
        audio = codes @ rng.normal(size=(dim, 4))
        writer.write_expert("audio@mr", [(ids, [np.tile(a, (2, 1)) for a in audio])])
        writer.write_relations(
            pa.table(
                {
                    "caption_id_a": ["v00-mr", "v01-mr"],
                    "caption_id_b": ["v01-mr", "v02-mr"],
                    "label": [1, 0],
                    "annotator": ["a", "a"],
                }
            )
        )
    return path


FAST = {
    "epochs": 1,
    "data": {"batch_size": 6, "caption_langs": ["mr", "en"], "audio_langs": ["mr"]},
    "model": {"shared_dim": 8, "word_dim": 4, "text_vlad_clusters": 2, "video_vlad_clusters": 2},
}


def write_suite(root, name, rows, **meta):
    """A suite folder: ``rows`` is [(file stem, label, loss name, extra config dict)]."""
    folder = root / name
    folder.mkdir(parents=True)
    entries = []
    for stem, label, loss, extra in rows:
        config = {
            **yaml.safe_load(yaml.safe_dump(FAST)),
            "name": f"tiny-{stem}",
            "loss": {"name": loss},
        }
        for key, value in extra.items():
            config.setdefault(key, {}).update(value) if isinstance(value, dict) else config.update(
                {key: value}
            )
        (folder / f"{stem}.yaml").write_text(yaml.safe_dump(config))
        entries.append({"config": f"{stem}.yaml", "label": label})
    (folder / "suite.yaml").write_text(
        yaml.safe_dump({"title": f"Tiny {name}", "rows": entries, **meta}, allow_unicode=True)
    )
    return folder


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory):
    return build_tiny_dataset(tmp_path_factory.mktemp("data") / "tiny")


@pytest.fixture(scope="session")
def tiny_suites(tmp_path_factory):
    root = tmp_path_factory.mktemp("suites")
    write_suite(
        root,
        "tiny",
        [
            ("mm", "MM", "mm", {}),
            ("po-m", "PO(M)", "po", {"supervision": {"manual_relations": True}}),
            ("ran", "RAN", "ran", {}),
        ],
        comparisons=[{"a": "PO(M)", "b": "MM"}, {"a": "best", "b": "MM"}],
        best_of=["RAN", "PO(M)"],
        fusion={"members": ["RAN", "PO(M)"], "methods": ["avg", "hybrid"], "hybrid_q": 1},
    )
    return root
