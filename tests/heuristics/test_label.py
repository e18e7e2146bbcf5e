import json

import pyarrow as pa
import pytest

from heuristics.__main__ import main
from heuristics.classes import lexicon_entries, read_lexicon
from heuristics.label import LABEL_NAMES as LABELS
from heuristics.label import (
    LabelConfig,
    LabelError,
    label_dataset,
    query_statistics,
    sample_pairs,
)
from heuristics.lexicon_tagger import LexiconTagger
from rudder.data.layout import DatasetFolder

from .conftest import CAPTIONS, build_dataset


def files(root):
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_query_statistics_by_hand():
    # classes of the tiny dataset's train captions (see test_label_columns_and_statistics)
    nouns = [["n:paper"], ["n:paper"], ["n:paper", "n:card"], ["n:bottle"]]
    verbs = [["v:cut"], ["v:cut"], ["v:fold"], []]
    s = query_statistics(nouns, verbs, 0.5, 0.5)
    # per query (positive, partial, negative):
    # c1 (1, 1, 1), c2 (1, 1, 1), c3 (0, 2, 1), c4 (0, 0, 3)
    counts = {name: {k: s[name][k] for k in ("mean", "median")} for name in s if name in LABELS}
    assert counts["positive"] == {"mean": 0.5, "median": 0.5}
    assert counts["partial"] == {"mean": 1.0, "median": 1.0}
    assert counts["negative"] == {"mean": 1.5, "median": 1.0}
    # shares of the 3 other captions: partial 1/3, 1/3, 2/3, 0 -> mean 1/3, median 1/3,
    # p25 = 0.25 between 0 and 1/3 (numpy's linear interpolation), p90 = 1/3 + 0.7 * 1/3
    share = s["partial"]["share_percent"]
    assert share["mean"] == pytest.approx(100 / 3) and share["p50"] == pytest.approx(100 / 3)
    assert share["p25"] == pytest.approx(25.0) and share["p90"] == pytest.approx(170 / 3)
    assert s["negative"]["share_percent"]["p10"] == pytest.approx(100 / 3)
    assert s["queries"] == 4 and s["queries_without_nouns_or_verbs"] == 0
    # a subset of evenly spaced queries: 0 and 3
    s = query_statistics(nouns, verbs, 0.5, 0.5, max_queries=2)
    assert s["queries"] == 2 and s["negative"]["mean"] == 2.0
    # with alpha_n = 1 the c3 -> c1 pair (noun overlap 1/2) is no longer partial
    assert query_statistics(nouns, verbs, 1.0, 0.5)["partial"]["mean"] == 0.5


def test_label_columns_and_statistics(tiny_dataset, lexicon_path):
    classes = read_lexicon(lexicon_path)
    tagger = LexiconTagger(lexicon_entries(classes))
    stats = label_dataset(tiny_dataset, tagger, classes, LabelConfig(alpha_n=0.5, alpha_v=0.5))
    train = DatasetFolder(tiny_dataset).captions("train").to_pydict()
    assert train["nouns"] == [["paper"], ["कागज़"], ["paper", "card"], ["bottle"]]
    assert train["verbs"] == [["cut"], ["काटना"], ["fold"], []]
    assert train["noun_classes"] == [["n:paper"], ["n:paper"], ["n:paper", "n:card"], ["n:bottle"]]
    assert train["verb_classes"] == [["v:cut"], ["v:cut"], ["v:fold"], []]
    assert stats["train"]["positive"]["mean"] == 0.5 and stats["train"]["negative"]["median"] == 1.0
    # test split: c5 (card; cut) and c6 (-; fold) share nothing
    assert stats["test"]["negative"]["mean"] == stats["test"]["negative"]["median"] == 1.0
    assert set(stats) == {"train", "test"}


def test_dry_run_and_overwrite(tiny_dataset, lexicon_path, capsys):
    before = files(tiny_dataset)
    args = [
        "label",
        "--dataset",
        str(tiny_dataset),
        "--tagger",
        "lexicon",
        "--lexicon",
        str(lexicon_path),
        "--no-cache",
    ]
    assert main(args + ["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "| train | 4 | 4 | 0.50 / 0.5 | 1.00 / 1 | 1.50 / 1 | 0 |" in out and "dry run" in out
    assert files(tiny_dataset) == before
    assert main(args) == 0
    labelled = files(tiny_dataset)
    assert labelled != before
    # now the columns exist: a second run needs --overwrite
    assert main(args) == 2
    assert "pass --overwrite" in capsys.readouterr().err
    assert files(tiny_dataset) == labelled
    assert main(args + ["--overwrite", "--alpha-n", "1.0"]) == 0


def test_failed_run_leaves_dataset_unchanged(tmp_path, lexicon_path, capsys):
    captions = CAPTIONS[:-1] + [("c6", "v5", "en", "   ")]
    root = build_dataset(tmp_path / "bad", captions)
    before = files(root)
    assert (
        main(
            [
                "label",
                "--dataset",
                str(root),
                "--tagger",
                "lexicon",
                "--lexicon",
                str(lexicon_path),
                "--no-cache",
            ]
        )
        == 2
    )
    assert (
        "caption 'c6' in captions/test.parquet (en) is empty or whitespace only"
        in capsys.readouterr().err
    )
    assert files(root) == before


def test_unknown_language_in_captions(tmp_path, lexicon_path):
    root = build_dataset(tmp_path / "ok")
    # write a caption with a bad language straight into the parquet (the writer would refuse it)
    import pyarrow.parquet as pq

    path = root / "captions" / "test.parquet"
    table = pq.read_table(path)
    table = table.set_column(table.column_names.index("lang"), "lang", pa.array(["fr", "en"]))
    pq.write_table(table, path)
    classes = read_lexicon(lexicon_path)
    with pytest.raises(
        Exception, match=r"unsupported language 'fr' in captions/test.parquet, caption 'c5'"
    ):
        label_dataset(root, LexiconTagger(lexicon_entries(classes)), classes)


def test_lexicon_tagger_learns_from_manual_columns(tmp_path, capsys):
    manual = {
        "nouns": [["paper"], ["कागज़"], ["paper", "card"], ["bottle"], ["card"], []],
        "verbs": [["cut"], ["काटना"], ["fold"], [], ["cut"], ["fold"]],
    }
    root = build_dataset(
        tmp_path / "manual",
        extra_columns={k: pa.array(v, pa.list_(pa.string())) for k, v in manual.items()},
    )
    report = tmp_path / "report.json"
    # no lexicon file: the words come from the captions' own nouns/verbs columns
    assert (
        main(
            [
                "label",
                "--dataset",
                str(root),
                "--tagger",
                "lexicon",
                "--no-cache",
                "--dry-run",
                "--report",
                str(report),
            ]
        )
        == 0
    )
    stats = json.loads(report.read_text())["statistics"]
    # without a lexicon every lemma is its own singleton class; hi कागज़ no longer matches en paper
    assert stats["train"]["positive"]["mean"] == 0.0


def test_lexicon_tagger_needs_words(tiny_dataset, capsys):
    assert (
        main(
            [
                "label",
                "--dataset",
                str(tiny_dataset),
                "--tagger",
                "lexicon",
                "--no-cache",
                "--dry-run",
            ]
        )
        == 2
    )
    assert "the lexicon tagger has no words" in capsys.readouterr().err


def test_not_a_dataset(tmp_path, capsys):
    assert main(["label", "--dataset", str(tmp_path), "--tagger", "lexicon", "--dry-run"]) == 2
    assert "is not a rudder dataset" in capsys.readouterr().err


def test_sample_dataset_manual_classes_recovered():
    sample = pytest.importorskip("rudder.data.sample")
    from pathlib import Path

    root = sample.sample_dataset_path()
    lexicon = Path(__file__).resolve().parents[2] / "rudder" / "data" / "sample_lexicon.tsv"
    classes = read_lexicon(lexicon)
    tables = {s: DatasetFolder(root).captions(s) for s in ("test",)}
    rows = list(
        zip(*[tables["test"].column(c).to_pylist() for c in ("lang", "text", "nouns", "verbs")],
            strict=True)
    )
    tagger = LexiconTagger(lexicon_entries(classes), rows)
    from heuristics.label import annotate
    from heuristics.nouns_verbs import ExtractionOptions

    out = annotate(tables["test"], tagger, classes, ExtractionOptions())
    gold = zip(
        tables["test"].column("noun_classes").to_pylist(),
        tables["test"].column("verb_classes").to_pylist(), strict=True,
    )
    pred = zip(out.column("noun_classes").to_pylist(), out.column("verb_classes").to_pylist(),
               strict=True)
    agree = sum(set(gn) == set(pn) and set(gv) == set(pv)
                for (gn, gv), (pn, pv) in zip(gold, pred, strict=True))
    # measured: 99.0% of all the sample's captions (v2.0) get their manual classes back
    assert agree / out.num_rows > 0.95


def test_sample_pairs_are_labelled_as_the_heuristic_says():
    nouns = [["n:paper"], ["n:paper"], ["n:paper", "n:card"], ["n:bottle"], ["n:card"]]
    verbs = [["v:cut"], ["v:cut"], ["v:fold"], [], ["v:fold"]]

    def by_hand(q, c):  # docs/architecture.md's noun/verb heuristic, alpha_n = alpha_v = 0.5
        overlaps = [len(set(a[q]) & set(a[c])) / len(a[q]) for a in (nouns, verbs) if a[q]]
        if overlaps and all(o == 1 for o in overlaps):
            return 2
        return int(any(o >= 0.5 for o in overlaps))

    pairs = sample_pairs(nouns, verbs, 0.5, 0.5, count=9, seed=3)
    assert len(pairs) == 9 and len(set(pairs)) == 9
    assert all(q != c and label == by_hand(q, c) for q, c, label in pairs)
    # three of each label: the 20 ordered pairs hold 3 positive (0-1, 1-0, 4-2), 5 partial
    # (0-2, 1-2, 2-0, 2-1, 2-4) and 12 negative
    assert sorted(label for *_, label in pairs) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert pairs == sample_pairs(nouns, verbs, 0.5, 0.5, count=9, seed=3)  # seeded
    # 5 of each wanted, but only 3 positives: negatives take the 2 left over
    many = [label for *_, label in sample_pairs(nouns, verbs, 0.5, 0.5, count=15, seed=0)]
    assert (many.count(2), many.count(0), many.count(1)) == (3, 7, 5)


def test_a_missing_label_leaves_its_share_to_the_others():
    """Two groups of identical captions: 12 positive and 18 negative pairs, no partial. The
    partial share (filled last) used to go nowhere: 6 pairs for count=9."""
    nouns = [["a"], ["a"], ["a"], ["b"], ["b"], ["b"]]
    verbs = [["x"], ["x"], ["x"], ["y"], ["y"], ["y"]]
    labels = [label for *_, label in sample_pairs(nouns, verbs, 0.5, 0.5, count=9)]
    assert (labels.count(2), labels.count(0), labels.count(1)) == (6, 3, 0)


def test_langs_restricts_labels_and_statistics(tiny_dataset, lexicon_path, capsys):
    args = ["label", "--dataset", str(tiny_dataset), "--tagger", "lexicon"]
    args += ["--lexicon", str(lexicon_path), "--langs", "en", "--sample-pairs", "3"]
    report = tiny_dataset.parent / "report.json"
    assert main([*args, "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "| train | partial |" in out and "Sampled pairs of train" in out
    train = DatasetFolder(tiny_dataset).captions("train").to_pydict()
    # the Hindi caption c2 is left unlabelled; the English ones are labelled
    assert train["noun_classes"] == [["n:paper"], None, ["n:paper", "n:card"], ["n:bottle"]]
    stats = json.loads(report.read_text())["statistics"]
    assert stats["train"]["captions"] == 3 and len(stats["train"]["sample"]) == 3
    # no captions in the asked language: a clear error, nothing written
    before = files(tiny_dataset)
    assert main([*args[:-4], "--langs", "ta", "--overwrite"]) == 2
    assert "no captions in ta (the dataset has en, hi)" in capsys.readouterr().err
    assert files(tiny_dataset) == before


def test_concurrent_label_runs_lose_no_columns(tiny_dataset, lexicon_path, capsys):
    """`label --langs en` is slowed while tagging; `label --langs hi` writes meanwhile. The
    slow run then finds the captions changed and writes nothing (it used to put None back
    over the hi labels); a rerun with --overwrite labels en and keeps hi."""
    from .conftest import start_slowed

    common = ["--dataset", tiny_dataset, "--tagger", "lexicon", "--lexicon", lexicon_path]
    common += ["--no-cache", "--stats-queries", "10"]
    marker = lexicon_path.parent / "inside"
    argv = ["label", "--langs", "en", *common]
    writer = start_slowed("heuristics.label", "annotate", marker, argv)
    assert main(["label", "--langs", "hi", *map(str, common)]) == 0
    err = writer.communicate(timeout=60)[1]
    assert writer.returncode == 2 and "the captions changed while they were being labelled" in err
    train = DatasetFolder(tiny_dataset).captions("train").to_pydict()
    nouns = dict(zip(train["caption_id"], train["nouns"], strict=True))
    assert nouns == {"c1": None, "c2": ["कागज़"], "c3": None, "c4": None}
    assert main(["label", "--langs", "en", "--overwrite", *map(str, common)]) == 0
    train = DatasetFolder(tiny_dataset).captions("train").to_pydict()
    assert dict(zip(train["caption_id"], train["nouns"], strict=True))["c2"] == ["कागज़"]
    assert dict(zip(train["caption_id"], train["nouns"], strict=True))["c1"] == ["paper"]


def test_a_missing_model_is_reported_before_any_tagging(tiny_dataset, lexicon_path):
    """With a model for en only, en captions were tagged (minutes, with Stanza) before hi
    failed; now nothing is tagged and the message suggests --langs."""
    from heuristics.taggers import TaggerError

    tagged = []

    class EnglishOnly(LexiconTagger):
        def model_id(self, lang):
            if lang != "en":
                raise TaggerError(f"no model for {lang!r}")
            return super().model_id(lang)

        def tag(self, texts, lang):
            tagged.append(lang)
            return super().tag(texts, lang)

    classes = read_lexicon(lexicon_path)
    tagger = EnglishOnly(lexicon_entries(classes))
    with pytest.raises(LabelError, match=r"no tagger model for hi, so nothing was tagged, or "
                       r"label only --langs en: no model for 'hi'"):
        label_dataset(tiny_dataset, tagger, classes)
    assert tagged == []


def test_a_caption_with_a_nan_time_still_gets_labelled(tiny_dataset, lexicon_path):
    """The "captions changed meanwhile" check compares the files, not their values: a NaN
    start compared unequal to itself, so label refused every run."""
    import pyarrow as pa

    from rudder.data.layout_writer import replace_tables

    train = DatasetFolder(tiny_dataset).captions("train")
    start = pa.array([float("nan")] + train.column("start").to_pylist()[1:], pa.float32())
    replace_tables(tiny_dataset, "captions",
                   {"train": train.set_column(train.schema.get_field_index("start"), "start",
                                              start)})
    args = ["label", "--dataset", str(tiny_dataset), "--tagger", "lexicon", "--lexicon",
            str(lexicon_path), "--no-cache", "--stats-queries", "10", "--langs", "en"]
    assert main(args) == 0
    assert DatasetFolder(tiny_dataset).captions("train").to_pydict()["nouns"][0] == ["paper"]


def _one_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_a_deleted_split_file_is_an_error(tiny_dataset, lexicon_path, capsys):
    """label used to label the splits left and skip the deleted one silently."""
    (tiny_dataset / "captions" / "train.parquet").unlink()
    before = files(tiny_dataset)
    args = ["label", "--dataset", str(tiny_dataset), "--tagger", "lexicon",
            "--lexicon", str(lexicon_path), "--no-cache"]
    assert main(args) == 2
    line = _one_error(capsys)
    assert "captions/train.parquet is missing, but the dataset's card lists it" in line
    assert files(tiny_dataset) == before


def test_a_truncated_class_csv_is_refused(tiny_dataset, lexicon_path, tmp_path, capsys):
    """``head -c`` of EPIC's noun class CSV gave noun accuracy 2% with exit 0."""
    classes = tmp_path / "nouns.csv"
    classes.write_text("id,key,instances,category\n0,paper,\"['paper']\",things\n"
                       "1,card,\"['card']\",thi", encoding="utf-8")
    args = ["label", "--dataset", str(tiny_dataset), "--tagger", "lexicon",
            "--lexicon", str(lexicon_path), "--no-cache", "--noun-classes", str(classes)]
    before = files(tiny_dataset)
    assert main(args) == 2
    assert "nouns.csv:3: the last line looks cut mid-row" in _one_error(capsys)
    assert files(tiny_dataset) == before
