"""The simulated sample dataset: determinism, counts, language, annotations, relations, features."""

import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rudder.data import sample
from rudder.data.layout import SPLITS, DatasetFolder
from rudder.data.sample_text import (
    LANGS,
    NOUNS,
    VERBS,
    _tamil_cases,
    _telugu_cases,
    lexicon_rows,
    render_describing,
    render_lexicon_tsv,
    render_listing,
    surface_forms,
)
from rudder.languages import script_of

LEXICON_FILE = Path(sample.__file__).with_name("sample_lexicon.tsv")
SCRIPT = {"mr": "devanagari", "hi": "devanagari", "ta": "tamil", "te": "telugu", "en": "latin"}


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    path = sample.build_sample(tmp_path_factory.mktemp("sample") / "ds")
    folder = DatasetFolder(path)
    captions = pa.concat_tables([folder.captions(s) for s in SPLITS]).to_pylist()
    videos = pa.concat_tables([folder.videos(s) for s in SPLITS]).to_pylist()
    return path, folder, captions, {v["video_id"]: v for v in videos}


def test_two_builds_are_byte_identical(built, tmp_path):
    path = built[0]
    again = sample.build_sample(tmp_path / "again")
    files = sorted(p.relative_to(path) for p in path.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert len(files) > 20
    for name in files:
        assert (path / name).read_bytes() == (again / name).read_bytes(), name


def test_meta_and_card_say_simulated(built):
    path, folder = built[0], built[1]
    assert folder.meta.simulated is True
    assert folder.meta.extra["generator_version"] == sample.SAMPLE_VERSION
    assert folder.meta.extra["seed"] == sample.SAMPLE_SEED
    card = (path / "README.md").read_text(encoding="utf-8")
    assert "SIMULATED" in card and f"seed {sample.SAMPLE_SEED}" in card and "license: mit" in card


def test_counts_splits_and_caption_languages(built):
    _, _, captions, videos = built
    assert len(videos) == sample.NUM_VIDEOS == 800
    splits = Counter(v["split"] for v in videos.values())
    assert splits == {"train": 480, "validation": 160, "test": 160}
    per = Counter((c["video_id"], c["lang"]) for c in captions)
    assert set(per.values()) <= {5, 6, 7, 8} and len(set(per.values())) == 4
    langs_of = {}
    for video_id, lang in per:
        langs_of.setdefault(video_id, set()).add(lang)
    assert all({"mr", "hi", "en"} <= langs for langs in langs_of.values())
    for lang in ("ta", "te"):
        rate = sum(lang in langs for langs in langs_of.values()) / len(videos)
        assert rate == pytest.approx(sample.CAPTION_LANG_RATES[lang], abs=0.01)
    # Translations of one segment: same times, kind and classes in every language.
    segments = {}
    for c in captions:
        key = c["caption_id"].replace(f"-{c['lang']}-", "-")
        value = (c["start"], c["end"], c["kind"], c["noun_classes"], c["verb_classes"])
        assert segments.setdefault(key, value) == value


def test_audio_and_visual_availability_rates(built):
    videos = built[3].values()
    rate = {e: np.mean([e in v["experts"] for v in videos]) for e in sample.EXPERTS}
    assert rate["audio@mr"] == 1.0
    assert rate["audio@hi"] == pytest.approx(0.54, abs=0.02)
    assert rate["audio@ta"] == pytest.approx(0.27, abs=0.02)
    assert rate["audio@te"] == pytest.approx(0.23, abs=0.02)
    all_four = np.mean(
        [all(f"audio@{lang}" in v["experts"] for lang in ("mr", "hi", "ta", "te")) for v in videos]
    )
    assert all_four == pytest.approx(0.21, abs=0.02)
    for expert in ("scene", "object", "action"):
        assert 0.9 < rate[expert] < 1.0  # a few missing, to exercise masks


def test_captions_are_in_the_right_script_and_contain_their_words(built):
    captions, videos = built[2], built[3]
    for c in captions:
        lang = c["lang"]
        assert script_of(c["text"]) == SCRIPT[lang], c
        for concept in c["noun_classes"] + c["verb_classes"]:
            text = c["text"].lower() if lang == "en" else c["text"]
            assert any(form in text for form in surface_forms(concept, lang)), (concept, c)
        assert c["machine_translated"] == (lang in ("ta", "te"))
        assert 0 <= c["start"] < c["end"] <= videos[c["video_id"]]["duration"]
        if c["kind"] == "listing":
            assert c["verbs"] == [] and 2 <= len(c["nouns"]) <= 6
        else:
            assert c["kind"] == "describing" and 1 <= len(c["verbs"]) <= 2


def test_recipes_have_3_to_6_materials_and_2_to_5_actions(built):
    materials, actions = {}, {}
    for c in built[2]:
        materials.setdefault(c["video_id"], set()).update(c["noun_classes"])
        actions.setdefault(c["video_id"], set()).update(c["verb_classes"])
    assert {len(m) for m in materials.values()} <= set(range(3, 7))
    assert {len(a) for a in actions.values()} <= set(range(2, 6))


def test_class_columns_match_the_lexicon_file(built):
    assert LEXICON_FILE.read_text(encoding="utf-8") == render_lexicon_tsv()
    rows = [line.split("\t") for line in LEXICON_FILE.read_text(encoding="utf-8").splitlines()[1:]]
    lemma = {(concept, lang): word for concept, pos, lang, word in rows}
    assert {pos for _, pos, _, _ in rows} == {"noun", "verb"}
    assert len(lemma) == len(rows) == (len(NOUNS) + len(VERBS)) * len(LANGS)
    for lang in LANGS:  # one concept per lemma within a language and part of speech
        words = [(pos, w) for c, pos, la, w in rows if la == lang]
        assert len(set(words)) == len(words)
    for c in built[2]:
        assert c["nouns"] == [lemma[(k, c["lang"])] for k in c["noun_classes"]]
        assert c["verbs"] == [lemma[(k, c["lang"])] for k in c["verb_classes"]]
        assert all(k.startswith("n:") for k in c["noun_classes"])
        assert all(k.startswith("v:") for k in c["verb_classes"])


def test_relations_reference_captions_and_follow_the_truth(built):
    folder, captions = built[1], {c["caption_id"]: c for c in built[2]}
    relations = folder.relations().to_pylist()
    assert 3000 <= len(relations) <= 10000
    assert Counter(r["label"] for r in relations).keys() == {0, 1, 2, 3}
    assert len({r["annotator"] for r in relations}) == 4
    for r in relations:
        a, b = captions[r["caption_id_a"]], captions[r["caption_id_b"]]
        shared = set(a["noun_classes"] + a["verb_classes"]) & set(
            b["noun_classes"] + b["verb_classes"]
        )
        same_segment = (
            a["caption_id"][:5] == b["caption_id"][:5]
            and a["caption_id"][-2:] == b["caption_id"][-2:]
        )
        assert {a["lang"], b["lang"]} <= {"mr", "hi", "en"} and a["caption_id"] != b["caption_id"]
        assert built[3][a["video_id"]]["split"] == "train"
        if same_segment:
            assert r["label"] == 2
        if r["label"] == 0:
            assert not shared
        if r["label"] in (1, 3):
            assert shared
        if r["label"] == 3:
            assert a["video_id"] == b["video_id"]


def test_relation_labels_hand_worked():
    hot = lambda *rows: np.array(rows, dtype=bool)
    # pairs: same segment; identical classes across videos; listing->describing in one video;
    # next describing step sharing the action; shared material only; nothing shared.
    labels = sample.relation_labels(
        same_video=np.array([1, 0, 1, 1, 0, 0], bool),
        same_segment=np.array([1, 0, 0, 0, 0, 0], bool),
        kind_a=np.array(
            ["describing", "describing", "listing", "describing", "listing", "listing"]
        ),
        kind_b=np.array(
            ["describing", "describing", "describing", "describing", "describing", "listing"]
        ),
        seg_a=np.array([2, 1, 0, 2, 0, 0]),
        seg_b=np.array([2, 3, 3, 3, 1, 0]),
        nouns_a=hot([1, 0, 0], [1, 0, 0], [1, 1, 0], [1, 0, 0], [1, 1, 0], [1, 0, 0]),
        nouns_b=hot([1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 1, 0], [0, 1, 1], [0, 1, 0]),
        verbs_a=hot([1, 0], [0, 1], [0, 0], [1, 0], [0, 0], [0, 0]),
        verbs_b=hot([1, 0], [0, 1], [1, 0], [1, 0], [0, 1], [0, 0]),
    )
    assert labels.tolist() == [2, 2, 3, 3, 1, 0]


def test_features_only_for_available_experts_with_right_shapes(built):
    folder, videos = built[1], built[3]
    for expert, info in sample.EXPERTS.items():
        seen = set()
        for split in SPLITS:
            table = folder.features(expert, split)
            for row in table.to_pylist():
                video = videos[row["video_id"]]
                assert expert in video["experts"] and video["split"] == split
                feature = np.asarray(row["feature"], dtype=np.float32)
                if info.variable_length:
                    assert (
                        feature.ndim == 2
                        and 4 <= feature.shape[0] <= 12
                        and feature.shape[1] == info.dim
                    )
                else:
                    assert feature.shape == (info.dim,)
                assert np.isfinite(feature).all()
                seen.add(row["video_id"])
        assert seen == {v for v, video in videos.items() if expert in video["experts"]}


def test_object_features_carry_evidence_of_materials(built):
    """Ridge from object features to a video's materials: test top-3 precision far above chance."""
    folder, captions = built[1], built[2]
    materials = {}
    for c in captions:
        materials.setdefault(c["video_id"], set()).update(c["noun_classes"])
    concepts = sorted(NOUNS)

    def arrays(split):
        rows = folder.features("object", split).to_pylist()
        x = np.array([r["feature"] for r in rows])
        y = np.array([[k in materials[r["video_id"]] for k in concepts] for r in rows], float)
        return x, y

    (x, y), (xt, yt) = arrays("train"), arrays("test")
    weights = np.linalg.solve(x.T @ x + 100.0 * np.eye(x.shape[1]), x.T @ y)
    top3 = np.argsort(-(xt @ weights), axis=1)[:, :3]
    precision = np.take_along_axis(yt, top3, axis=1).mean()
    chance = yt.mean()
    assert chance < 0.2 and precision > 0.5


def test_hand_checked_sentences():
    tie = [("v:tie", "n:thread", "n:bamboo_skewer", None)]
    assert render_describing("ta", tie, 0) == "நூலை மூங்கில் குச்சியில் கட்டவும்."
    assert render_describing("ta", [("v:spin", "n:wheel", None, None)], 0) == "சக்கரத்தைச் சுழற்றவும்."
    assert (
        render_describing("hi", [("v:cut", "n:bottle", None, "n:scissors")], 1)
        == "अब कैंची से बोतल को काटिए।"
    )
    assert render_describing("mr", [("v:insert", "n:thread", "n:straw", None)] + tie, 0) == (
        "आधी दोरा स्ट्रॉमध्ये घाला, मग दोरा बांबूच्या काडीला बांधा."
    )
    assert render_describing("te", [("v:cut", "n:bottle", None, "n:scissors")], 1) == (
        "ఇప్పుడు కత్తెరతో సీసాను కత్తిరించండి."
    )
    assert (
        render_describing("en", [("v:fill", "n:syringe", "n:water", None)], 2)
        == "Next, fill the syringe with water."
    )
    assert render_listing("en", ["n:bottle", "n:scissors", "n:glue"], 0) == (
        "For this toy we need a bottle, a pair of scissors and some glue."
    )
    assert render_listing("hi", ["n:balloon", "n:thread"], 3) == "हमें गुब्बारा और धागा भी चाहिए।"
    with pytest.raises(ValueError, match="one or two steps"):
        render_describing("en", tie * 3, 0)


def test_tamil_and_telugu_case_rules():
    assert _tamil_cases("காந்தம்")["acc"] == "காந்தத்தை"
    assert _tamil_cases("குழாய்")["dat"] == "குழாய்க்கு"
    assert _tamil_cases("ஸ்ட்ரா")["loc"] == "ஸ்ட்ராவில்"
    assert _tamil_cases("குச்சி")["ins"] == "குச்சியால்"
    assert _tamil_cases("பாட்டில்")["soc"] == "பாட்டிலுடன்"
    assert _telugu_cases("దారం")["acc"] == "దారాన్ని"
    assert _telugu_cases("మట్టి")["dat"] == "మట్టికి"
    assert _telugu_cases("సీసా")["on"] == "సీసాపై"
    assert ("n:clay", "noun", "ta", "களிமண்") in lexicon_rows()


def test_exact_assignment_counts():
    rng = np.random.default_rng(0)
    assert np.bincount(sample.exact_assignment(rng, 10, [0.54, 0.46])).tolist() == [5, 5]
    counts = np.bincount(
        sample.exact_assignment(rng, 100, list(sample.AUDIO_COMBOS.values())), minlength=8
    )
    assert counts.tolist() == [21, 4, 1, 1, 28, 1, 0, 44]


def test_load_dataset_reads_the_folder(built, tmp_path):
    datasets = pytest.importorskip("datasets")
    captions = datasets.load_dataset(str(built[0]), "captions", cache_dir=str(tmp_path))
    assert {split: len(captions[split]) for split in SPLITS} == {
        s: built[1].captions(s).num_rows for s in SPLITS
    }
    assert captions["train"][0]["noun_classes"]


def test_cache_builds_once_and_survives_a_race(built, tmp_path, monkeypatch):
    monkeypatch.setenv("RUDDER_CACHE", str(tmp_path / "cache"))
    target = tmp_path / "cache" / f"sample-v{sample.SAMPLE_VERSION}"
    calls = []

    def fake_build(out_dir, overwrite=False):  # a copy of the session build, as a build would write
        calls.append(out_dir)
        shutil.copytree(built[0], out_dir)
        return Path(out_dir)

    monkeypatch.setattr(sample, "build_sample", fake_build)
    assert sample.sample_dataset_path() == target and (target / "rudder.json").is_file()
    assert sample.sample_dataset_path() == target and len(calls) == 1
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]  # no staging left

    shutil.rmtree(target)

    def racing_build(out_dir, overwrite=False):  # another process finishes first
        shutil.copytree(built[0], target)
        return fake_build(out_dir)

    monkeypatch.setattr(sample, "build_sample", racing_build)
    assert sample.sample_dataset_path() == target
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]


def test_cli(built, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        sample.main(["--help"])
    assert exit_info.value.code == 0 and "--out" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        sample.main(["--out", str(built[0])])
    assert exit_info.value.code == 2 and "already exists" in capsys.readouterr().err
