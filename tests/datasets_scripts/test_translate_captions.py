import time

import pytest

import rudder.translate as rt
from datasets_scripts.__main__ import main
from datasets_scripts.translate import translate_dataset
from rudder.atomic import LOCK_NAME
from rudder.data.layout import DatasetFolder
from rudder.translate import TranslationCache, TranslationUnavailable, translate_texts


class FakeBackend:
    """Stands in for GoogleBackend: '[dest] text', recording every request; can fail after N."""

    def __init__(self, fail_after=None):
        self.requests, self.fail_after = [], fail_after

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False

    async def translate(self, texts, src, dest):
        if self.fail_after is not None and len(self.requests) >= self.fail_after:
            raise TranslationUnavailable("network went away")
        self.requests.append(list(texts))
        return [f"[{dest}] {t}" for t in texts]


@pytest.fixture
def dataset(tmp_path, build):
    src = tmp_path / "src"
    src.mkdir()
    (src / "videos.tsv").write_text("video_id\tsplit\nv1\ttrain\nv2\ttrain\nv3\ttest\n")
    (src / "captions_mr.tsv").write_text(
        "video_id\ttext\tstart\tend\tkind\tnouns\tnoun_classes\n"
        "v1\tबाटली कापा\t0\t5\tcaption\tबाटली\tn:bottle\n"
        "v1\tकागद दुमडा\t5\t9\tcaption\tकागद\tn:paper\n"
        "v2\tबाटली कापा\t0\t4\tcaption\tबाटली\tn:bottle\n"
        "v3\tरंग द्या\t0\t3\tcaption\tरंग\tn:colour\n"
    )
    (src / "captions_en.tsv").write_text(
        "video_id\ttext\tstart\tend\tkind\nv1\tcut the bottle\t0\t5\tcaption\n"
    )
    code, out = build("rudder", src)
    assert code == 0
    return out


def _snapshot(root):
    """The dataset's files and bytes (the writers' lock file is no data)."""
    files = (p for p in sorted(root.rglob("*")) if p.is_file() and p.name != LOCK_NAME)
    return {p.relative_to(root): p.read_bytes() for p in files}


def test_full_path_with_fake_translator(dataset, tmp_path, loads):
    backend = FakeBackend()
    added = translate_dataset(
        dataset,
        "mr",
        ["ta", "te"],
        backend=backend,
        cache_path=tmp_path / "c.sqlite",
        batch_size=2,
        texts_per_second=0,
    )
    assert added == {"ta": 4, "te": 4}  # 3 train + 1 test Marathi captions
    # Three distinct Marathi texts per language, in batches of two.
    assert [len(r) for r in backend.requests] == [2, 1, 2, 1]
    folder = DatasetFolder(dataset)
    train = {r["caption_id"]: r for r in folder.captions("train").to_pylist()}
    row = train["v1/mr/0/mt-ta"]
    assert (row["text"], row["lang"], row["video_id"], row["machine_translated"]) == (
        "[ta] बाटली कापा",
        "ta",
        "v1",
        True,
    )
    assert (row["start"], row["end"], row["noun_classes"], row["nouns"]) == (
        0.0,
        5.0,
        ["n:bottle"],
        None,
    )
    assert "v1/en/0/mt-ta" not in train  # only the --from language is translated
    assert folder.captions("test").num_rows == 3
    assert folder.meta.languages == ["mr", "ta", "te", "en"]
    assert folder.meta.extra["translations"][0] == {
        "from": "mr",
        "to": "ta",
        "captions": 4,
        "engine": "FakeBackend",
    }
    card = (dataset / "README.md").read_text()
    assert (
        "| captions | train | 10 |" in card
        and "- ta" in card
        and "Machine translations added" in card
    )
    assert loads(dataset)["train"].num_rows == 10
    # A rerun finds everything translated and writes nothing.
    before = _snapshot(dataset)
    again = FakeBackend()
    assert (
        translate_dataset(dataset, "mr", ["ta"], backend=again, cache_path=tmp_path / "c.sqlite")
        == {}
    )
    assert again.requests == [] and _snapshot(dataset) == before


def test_interrupted_run_resumes_from_cache(dataset, tmp_path):
    cache = tmp_path / "c.sqlite"
    before = _snapshot(dataset)
    with pytest.raises(TranslationUnavailable, match="network went away"):
        translate_dataset(
            dataset,
            "mr",
            ["te"],
            backend=FakeBackend(fail_after=1),
            cache_path=cache,
            batch_size=2,
            texts_per_second=0,
        )
    assert _snapshot(dataset) == before  # the dataset is untouched
    assert len(TranslationCache(cache).get("mr", "te", ["बाटली कापा", "कागद दुमडा", "रंग द्या"])) == 2
    resumed = FakeBackend()
    translate_dataset(
        dataset, "mr", ["te"], backend=resumed, cache_path=cache, batch_size=2, texts_per_second=0
    )
    assert resumed.requests == [["रंग द्या"]]  # only the text the first run did not finish


def test_captions_changed_meanwhile_are_not_overwritten(dataset, tmp_path):
    """Another writer (here: inside the first translation batch) changes the captions; the
    translation then writes nothing instead of putting back the captions it read."""
    import pyarrow as pa

    from rudder.data.layout import LayoutError
    from rudder.data.layout_writer import replace_tables

    class ConcurrentWriter(FakeBackend):
        async def translate(self, texts, src, dest):
            train = DatasetFolder(dataset).captions("train")
            text = [t.replace("bottle", "bottles") for t in train["text"].to_pylist()]
            edited = train.set_column(train.schema.get_field_index("text"), "text", pa.array(text))
            replace_tables(dataset, "captions", {"train": edited})
            return await super().translate(texts, src, dest)

    with pytest.raises(LayoutError, match="captions changed while they were being translated"):
        translate_dataset(
            dataset, "mr", ["ta"], backend=ConcurrentWriter(), cache_path=tmp_path / "c.sqlite"
        )
    train = DatasetFolder(dataset).captions("train")
    assert "cut the bottles" in train["text"].to_pylist()
    assert not any(c.endswith("/mt-ta") for c in train["caption_id"].to_pylist())


def test_rate_limit_waits_between_batches(tmp_path, monkeypatch):
    waits = []

    async def fake_sleep(seconds):
        waits.append(seconds)

    monkeypatch.setattr(rt, "_pause", fake_sleep)
    texts = [f"t{i}" for i in range(5)]
    result = translate_texts(
        texts,
        "en",
        "hi",
        backend=FakeBackend(),
        cache_path=tmp_path / "c.sqlite",
        batch_size=2,
        texts_per_second=4,
    )
    assert result["t4"] == "[hi] t4"
    # Batches of 2 at 4 texts/s start 0.5 s apart; no wait after the last batch.
    assert len(waits) == 2 and all(0.45 < w <= 0.5 for w in waits)


def test_offline_stops_fast_and_writes_nothing(dataset, tmp_path, monkeypatch, capsys):
    # The real googletrans client, pointed at a closed local port: what an offline machine sees.
    monkeypatch.setattr(rt, "DEFAULT_SERVICE", "127.0.0.1:9")
    monkeypatch.setenv("RUDDER_CACHE", str(tmp_path / "cache"))
    before = _snapshot(dataset)
    started = time.monotonic()
    code = main(["translate", str(dataset), "--from", "mr", "--to", "ta", "te", "--timeout", "3"])
    assert time.monotonic() - started < 10
    assert code == 2
    err = capsys.readouterr().err
    assert (
        "error: cannot reach Google Translate at 127.0.0.1:9" in err and "check the network" in err
    )
    assert _snapshot(dataset) == before


def test_bad_languages(dataset, tmp_path):
    with pytest.raises(ValueError, match="unsupported language 'fr'"):
        translate_dataset(
            dataset, "mr", ["fr"], backend=FakeBackend(), cache_path=tmp_path / "c.sqlite"
        )
    with pytest.raises(ValueError, match="that is the source language"):
        translate_dataset(
            dataset, "mr", ["mr"], backend=FakeBackend(), cache_path=tmp_path / "c.sqlite"
        )


def test_text_features_config_survives_a_translation(tmp_path, build, loads):
    """The rewritten card keeps every config of the folder, text_features included."""
    import pickle

    import numpy as np

    from datasets_scripts.publish import validate_card

    src = tmp_path / "src"
    src.mkdir()
    (src / "videos.tsv").write_text("video_id\tsplit\nv1\ttrain\n")
    for lang, caption in (("mr", "बाटली"), ("en", "bottle")):
        (src / f"captions_{lang}.tsv").write_text(
            f"video_id\ttext\tstart\tend\tkind\nv1\t{caption}\t0\t5\tcaption\n"
        )
    text = tmp_path / "text.pickle"
    text.write_bytes(pickle.dumps({"v1": [np.ones((2, 3), np.float32)]}))
    code, out = build("rudder", src, "--text-features", text)
    assert code == 0
    translate_dataset(out, "mr", ["ta"], backend=FakeBackend(), cache_path=tmp_path / "c.sqlite")
    assert validate_card(out) == ["captions", "videos", "text_features"]
    assert "| text_features | train | 1 |" in (out / "README.md").read_text()
    assert loads(out, "text_features")["train"].num_rows == 1


def test_a_failure_before_the_commit_changes_nothing(dataset, tmp_path, monkeypatch):
    """Captions, rudder.json and the card are committed together: an interruption while the
    card is made leaves all three as they were, and the rerun records the translation."""
    import datasets_scripts.translate as translate_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    before = _snapshot(dataset)
    with monkeypatch.context() as patch:
        patch.setattr(translate_module, "render_card", interrupted)
        with pytest.raises(KeyboardInterrupt):
            translate_dataset(dataset, "mr", ["ta"], backend=FakeBackend(),
                              cache_path=tmp_path / "c.sqlite")
    assert _snapshot(dataset) == before
    assert translate_dataset(dataset, "mr", ["ta"], backend=FakeBackend(),
                             cache_path=tmp_path / "c.sqlite") == {"ta": 4}
    folder = DatasetFolder(dataset)
    assert folder.meta.languages == ["mr", "ta", "en"] and folder.meta.extra["translations"]
    assert "Machine translations added" in (dataset / "README.md").read_text()


def test_a_deleted_split_file_is_an_error(dataset, tmp_path):
    """A deleted caption split would be left untranslated, silently."""
    (dataset / "captions" / "test.parquet").unlink()
    before = _snapshot(dataset)
    with pytest.raises(Exception, match=r"captions/test.parquet is missing, but the dataset's "
                                         r"card lists it"):
        translate_dataset(dataset, "mr", ["ta"], backend=FakeBackend(),
                          cache_path=tmp_path / "c.sqlite")
    assert _snapshot(dataset) == before
