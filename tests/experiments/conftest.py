"""A tiny labelled dataset (with manual relations) and a tiny suite: runner tests in seconds."""

import pytest
import yaml

from ..factories import concept_dataset

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
    return concept_dataset(
        tmp_path_factory.mktemp("data") / "tiny",
        30,
        split_counts=(18, 4),
        object_dim=8,
        audio_dim=4,
        audio_frames=2,
        audio_missing_every=0,
        relations=[("v000-mr", "v001-mr", 1, "a"), ("v001-mr", "v002-mr", 0, "a")],
    )


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
        fusion=[
            {"members": ["RAN", "PO(M)"], "methods": ["avg", "hybrid"], "hybrid_q": 1,
             "mixed_losses": True},
            {"name": "RAN", "members": ["RAN"], "pool_seeds": True, "methods": ["max"],
             "hybrid_q": 1},
        ],
    )
    return root
