"""Training and querying with pretrained word vectors, n-gram hashing and CE text pickles."""


import datasets
import numpy as np
import pyarrow as pa
import pytest
import torch

from rudder import train
from rudder.config import ConfigError, TrainConfig, apply_override, from_dict, to_dict
from rudder.data.card import Card
from rudder.data.layout import DatasetFolder, ExpertInfo
from rudder.data.layout_writer import DatasetWriter
from rudder.data.text_side import build_text_side
from rudder.errors import RudderError
from rudder.evaluation.loading import load_run
from rudder.text.subwords import SubwordVocabulary

from ..factories import caption, write_ce_text_features, write_dataset

DIM = 6


def write_vec(path, words, seed=0):
    rng = np.random.default_rng(seed)
    lines = [f"{len(words)} {DIM}"] + [f"{w} " + " ".join(f"{v:.4f}" for v in rng.normal(size=DIM))
                                       for w in words]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_word_vectors_initialise_the_embeddings(tiny_dataset, tmp_path):
    path = write_vec(tmp_path / "en.vec", ["cut", "bottle", "straw", "unseenword"])
    data = TrainConfig().data
    data.caption_langs, data.word_vectors = ["mr", "en"], {"en": str(path)}
    side = build_text_side(DatasetFolder(tiny_dataset), data, seed=0)
    table, vocab = side.initial_embeddings, side.vocab
    assert table.shape == (len(vocab), DIM) and not table[0].any()
    lines = {l.split()[0]: np.array(l.split()[1:], float)
             for l in path.read_text().splitlines()[1:]}
    for word in ("cut", "bottle", "straw"):
        np.testing.assert_allclose(table[vocab.encode([word])[0]].numpy(), lines[word], atol=1e-6)
    assert "unseenword" not in vocab  # in the vectors but in no caption
    assert table[vocab.encode(["कापा"])[0]].abs().sum() > 0  # a Marathi word: drawn, not zero
    assert "pretrained vectors for 3 of" in side.summary


def test_word_vectors_add_evaluation_words_not_rare_training_ones(tmp_path):
    """min_word_count still drops rare training words; the vectors add only words of the
    validation and test captions."""
    splits = {"a": "train", "b": "train", "c": "validation", "d": "test"}
    texts = {"a": "cut the bottle", "b": "cut the rare bottle", "c": "glue", "d": "tie"}
    root = write_dataset(tmp_path / "ds", splits,
                         [caption(f"{v}/0", v, "en", t) for v, t in texts.items()],
                         {"scene": (ExpertInfo(2), list(splits), np.eye(4, 2, dtype=np.float32))},
                         languages=["en"])
    path = write_vec(tmp_path / "en.vec", ["cut", "rare", "glue"])
    data = TrainConfig().data
    data.caption_langs, data.word_vectors, data.min_word_count = ["en"], {"en": str(path)}, 2
    vocab = build_text_side(DatasetFolder(root), data).vocab
    assert "rare" not in vocab  # one training caption, known to the vectors
    assert "cut" in vocab and "glue" in vocab and "tie" not in vocab


def test_training_with_word_vectors_and_subwords(train_tiny, tmp_path):
    path = write_vec(tmp_path / "all.vec", ["cut", "glue", "tie", "कापा", "बाटली"])
    train_tiny(tmp_path / "run", "--set", f"data.word_vectors={{all: {path}}}",
               "--set", "data.subword_buckets=64")
    run = load_run(tmp_path / "run")
    assert isinstance(run.vocab, SubwordVocabulary) and run.config.model.word_dim == DIM
    assert run.model.word_embedding.weight.shape == (len(run.vocab) + 64, DIM)
    ids, mask = run.encode_queries(["कागदाची बाटली कापा"], ["mr"])
    assert ids.dim() == 3 and mask.all()
    assert ids[0, 0, 0] == 0 and ids[0, 0, 1:].gt(0).any()  # unseen inflection: n-grams only
    table = run.model.word_embedding.weight.detach()
    assert table[len(run.vocab):].abs().sum(1).gt(0).any()  # n-gram rows trained from zero
    with torch.no_grad():
        text, _ = run.model.encode_text(ids, mask)
    assert torch.isfinite(text).all()


def test_training_from_a_ce_text_feature_pickle(train_tiny, tiny_dataset, tmp_path):
    path = write_ce_text_features(tiny_dataset, tmp_path / "w2v_tiny.pickle",
                                  tokens=lambda rng: int(rng.integers(2, 5)))
    result = train_tiny(tmp_path / "run", "--set", f"data.text_encoder={path}",
                        "--set", "data.caption_langs=[en]")
    assert result["test"]["t2v"]["MdR"] >= 1
    run = load_run(tmp_path / "run")
    assert run.config.model.text_input_dim == 5
    with pytest.raises(ValueError, match="cannot encode free text"):
        run.encode_queries(["cut the bottle"], ["en"])


def test_text_side_config_is_checked():
    data = to_dict(TrainConfig())
    for override, message in (
        ("data.word_vectors={xx: v.vec}", "xx"),
        ("data.word_vectors=[v.vec]", "expected a mapping of strings to strings"),
        ("data.subword_min_n=7", "subword_min_n=7 is larger than data.subword_max_n=6"),
        ("data.subword_buckets=-1", "data.subword_buckets=-1 is not valid"),
    ):
        changed = to_dict(TrainConfig())
        for assignment in (override,) if isinstance(override, str) else override:
            apply_override(changed, assignment)
        with pytest.raises(RudderError, match=message):
            from_dict(changed)
    apply_override(data, "data.word_vectors={all: v.vec}")
    apply_override(data, "data.text_encoder=bundled")
    with pytest.raises(ConfigError, match="exclude each other"):
        from_dict(data)


def test_subword_hashing_with_frozen_embeddings_is_refused_for_new_runs_only(
        train_tiny, tmp_path, capsys):
    with pytest.raises(SystemExit):
        train_tiny(tmp_path / "new", "--set", "data.subword_buckets=64",
                   "--set", "model.freeze_embeddings=true")
    assert "exclude each other" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    train_tiny(tmp_path / "old", "--epochs", "1", "--set", "data.subword_buckets=64")
    saved = tmp_path / "old" / "config.yaml"  # as a run trained before the rule holds it
    saved.write_text(saved.read_text().replace("freeze_embeddings: false",
                                               "freeze_embeddings: true"))
    for checkpoint in (tmp_path / "old" / "checkpoints").glob("*.pt"):
        state = torch.load(checkpoint, weights_only=True)
        state["config"]["model"]["freeze_embeddings"] = True
        torch.save(state, checkpoint)
    assert load_run(tmp_path / "old").config.model.freeze_embeddings  # still readable
    train.main(["--output-dir", str(tmp_path / "old"), "--resume", "--epochs", "2"])


def test_training_from_the_datasets_text_features_config(tiny_dataset, tmp_path):
    source = DatasetFolder(tiny_dataset)
    meta = source.meta
    rng = np.random.default_rng(1)
    out = tmp_path / "with-text"
    with DatasetWriter(out, meta, Card("Tiny", "Tiny with token features.")) as writer:
        videos = [source.videos(s) for s in ("train", "validation", "test")]
        writer.write_videos(pa.concat_tables(videos))
        captions = pa.concat_tables([source.captions(s) for s in ("train", "validation", "test")])
        writer.write_captions(captions)
        for expert in meta.experts:
            tables = [t for t in (source.features(expert, s)
                                  for s in ("train", "validation", "test")) if t is not None]
            writer.write_expert(expert, [(t.column("video_id").to_pylist(),
                                          t.column("feature").to_pylist()) for t in tables])
        ids = captions.column("caption_id").to_pylist()
        arrays = [rng.normal(size=(int(rng.integers(1, 40)), 7)) for _ in ids]
        writer.write_text_features(7, [(ids[:30], arrays[:30]), (ids[30:], arrays[30:])])
    loaded = datasets.load_dataset(str(out), "text_features", split="test")
    assert loaded.num_rows == len(source.captions("test")) and len(loaded[0]["feature"][0]) == 7
    result = train.main(["--dataset", str(out), "--output-dir", str(tmp_path / "run"),
                         "--epochs", "1", "--set", "data.batch_size=8",
                         "--set", "model.shared_dim=16", "--set", "model.text_vlad_clusters=2",
                         "--set", "model.video_vlad_clusters=2",
                         "--set", "data.caption_langs=[mr, en]", "--set", "data.audio_langs=[mr]",
                         "--set", "data.text_encoder=dataset", "--set", "data.max_words=12"])
    assert result["test"]["t2v"]["MdR"] >= 1
    run = load_run(tmp_path / "run")
    assert run.config.model.text_input_dim == 7
    with pytest.raises(ValueError, match="cannot encode free text"):
        run.encode_queries(["cut the bottle"], ["en"])
    meta_file = out / "rudder.json"  # a declared size the stored vectors do not have
    meta_file.write_text(meta_file.read_text().replace('"text_features_dim": 7',
                                                       '"text_features_dim": 14'))
    from rudder.data.layout import LayoutError
    from rudder.data.loader import load_split
    from rudder.text.caption_features import DatasetTextFeatures

    folder = DatasetFolder(out)
    with pytest.raises(LayoutError, match=r"text_features/train.parquet: feature is .*\[7\]>, "
                       r"but rudder.json declares text_features_dim = 14"):
        load_split(folder, "train", list(folder.meta.experts), None, ["en"],
                   text_encoder=DatasetTextFeatures(folder))
