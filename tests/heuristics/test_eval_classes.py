"""eval-classes: sentence reading, the lookup baseline, scores and the CLI."""

import json

import pytest

from heuristics.__main__ import main
from heuristics.classes import ClassFileError, ClassMap
from heuristics.eval_classes import lookup, phrases, read_sentences, scores

HEADER = "narration_id,narration,verb_class,noun_classes,verb,nouns\n"
def _filled(rows: dict) -> str:
    """An EPIC class CSV with ids 0..max (contiguous, as EPIC's): ``rows`` {id: (key,
    instances)}, other ids filler classes no text names."""
    lines = [f"{i},{rows[i][0]},\"{rows[i][1]}\"" if i in rows
             else f"{i},zzfill{i},\"['zzfill{i}']\"" for i in range(max(rows) + 1)]
    return "id,key,instances\n" + "\n".join(lines) + "\n"


NOUN_CSV = _filled({3: ("cupboard", "['cupboard', 'cupboard:open']"), 8: ("sink", "['sink']")})
VERB_CSV = _filled({1: ("put", "['put']"), 3: ("open", "['open']"), 5: ("insert", "['put-in']")})


def _tiny_epic(tmp_path) -> list[str]:
    """Two EPIC-format sentences and class CSVs; the eval-classes arguments naming them."""
    (tmp_path / "n.csv").write_text(NOUN_CSV, encoding="utf-8")
    (tmp_path / "v.csv").write_text(VERB_CSV, encoding="utf-8")
    rows = ["a,open cupboard,3,[3],open,x", 'b,put cupboard in sink,5,"[3, 8]",put-in,x']
    (tmp_path / "s.csv").write_text(HEADER + "\n".join(rows) + "\n", encoding="utf-8")
    argv = ["eval-classes", "--sentences", str(tmp_path / "s.csv"), "--verb-classes"]
    return argv + [str(tmp_path / "v.csv"), "--noun-classes", str(tmp_path / "n.csv")]


def test_scores_by_hand():
    predicted = [("3", {"3"}), ("1", {"8", "3"}), (None, set())]
    gold = [("3", {"3"}), ("5", {"8", "3"}), ("0", {"8"})]
    result = scores(predicted, gold)
    assert result["verb_class_accuracy"] == pytest.approx(1 / 3)
    assert result["noun_set_accuracy"] == pytest.approx(2 / 3)
    assert result["both_accuracy"] == pytest.approx(1 / 3)
    assert result["noun_jaccard"] == pytest.approx((1 + 1 + 0) / 3)
    with pytest.raises(ValueError, match="no rows"):
        scores([], [])


def test_lookup_verb_is_not_swallowed_by_a_noun_phrase():
    classes = ClassMap()
    classes.add("noun", "en", "cupboard", "3", "t")
    classes.add("noun", "en", "cupboard:open", "3", "t")
    classes.add("verb", "en", "open", "3v", "t")
    table = phrases(classes)
    assert lookup(["open", "cupboard"], table) == ("3v", {"3"})
    assert lookup(["open", "cupboard"], table, verbs_first=False) == (None, {"3"})


def test_read_sentences_errors(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("narration_id,narration\nx,open door\n", encoding="utf-8")
    with pytest.raises(ClassFileError, match="missing columns"):
        read_sentences(path)
    path.write_text(HEADER + "a,open door,three,[3],open,['door']\n", encoding="utf-8")
    with pytest.raises(ClassFileError, match=r"s.csv:2: verb_class must be an integer"):
        read_sentences(path)


def test_cli_lookup_json(tmp_path, capsys):
    argv = _tiny_epic(tmp_path)
    assert main(argv + ["--method", "lookup", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    # the plain lookup finds "put" (class 1), not put-in: one verb of two
    assert result["rows"] == 2 and result["verb_class_accuracy"] == 50.0  # percent
    assert result["noun_set_accuracy"] == 100.0 and result["both_accuracy"] == 50.0
    assert main(argv + ["--method", "lookup"]) == 0
    assert "verb class accuracy: 50.0%" in capsys.readouterr().out
    assert main(argv[:2] + [str(tmp_path / "none.csv")] + argv[3:] + ["--method", "lookup"]) == 2
    assert "no such sentence CSV" in capsys.readouterr().err


def test_real_epic_lookup_baseline(shared_data):
    epic = shared_data / "epic100"
    argv = ["eval-classes", "--sentences", str(epic / "EPIC_100_retrieval_train_sentence.csv")]
    argv += ["--verb-classes", str(epic / "EPIC_100_verb_classes.csv")]
    argv += ["--noun-classes", str(epic / "EPIC_100_noun_classes.csv"), "--method", "lookup"]
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv + ["--json"]) == 0
    result = json.loads(out.getvalue())
    assert result["rows"] == 15989
    assert result["verb_class_accuracy"] == pytest.approx(83.4, abs=0.1)


@pytest.mark.slow
def test_cli_tagger_path_with_a_trained_stanza_model(tiny_treebank, tmp_path, capsys):
    from heuristics.stanza_training import TrainOptions, train_tagger

    models = tmp_path / "models"
    tiny = TrainOptions(size="tiny", max_steps=30, batch_size=10, eval_interval=30, lemma_steps=5)
    train_tagger("en", tiny_treebank / "train.conllu", tiny_treebank / "dev.conllu", models, tiny)
    argv = _tiny_epic(tmp_path) + ["--model-dir", str(models), "--no-cache", "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    # the imperative and particle rules settle both verbs whatever the tiny tagger says
    assert result["rows"] == 2 and result["verb_class_accuracy"] == 100.0
    assert main(argv + ["--without", "particles"]) == 0
    assert json.loads(capsys.readouterr().out)["verb_class_accuracy"] == 50.0  # percent


def test_gold_classes_missing_from_the_class_files_are_refused(tmp_path, capsys):
    """A class CSV cut short (``head``) scored gold rows of its lost classes as misses with
    exit 0; the first such row and class are named."""
    argv = _tiny_epic(tmp_path)
    (tmp_path / "n.csv").write_text(NOUN_CSV.split("\n4,")[0] + "\n", encoding="utf-8")
    assert main(argv + ["--method", "lookup"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "s.csv:3: gold noun class 8 is not in" in err[0]
    assert "n.csv (4 classes there)" in err[0] or "n.csv" in err[0]
