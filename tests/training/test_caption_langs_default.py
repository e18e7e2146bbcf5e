"""``data.caption_langs`` by default: the dataset's own caption languages (the sample keeps
``mr, hi, en``, the README's table), and the run says which it uses and what it leaves out."""

import pytest

from rudder.config import from_dict, with_caption_langs
from rudder.runs.layout import read_config

from ..app.conftest import build_app_dataset

FAST = ["--epochs", "1", "--set", "data.batch_size=8", "--set", "model.shared_dim=16",
        "--set", "model.word_dim=8", "--set", "model.text_vlad_clusters=2",
        "--set", "model.video_vlad_clusters=2"]


@pytest.fixture(scope="module")
def five_languages(tmp_path_factory):
    """30 videos captioned in mr, hi, ta, te and en (one caption each per language)."""
    return build_app_dataset(tmp_path_factory.mktemp("five") / "five")


def test_the_default_is_the_datasets_own_languages_and_the_samples_stays():
    config = from_dict({"data": {"dataset": "/data/own"}})
    assert config.data.caption_langs == []
    resolved = with_caption_langs(config, ["en", "ta", "hi"])
    assert resolved.data.caption_langs == ["hi", "ta", "en"]  # in SUPPORTED order
    assert config.data.caption_langs == []  # the caller's config is left as it was
    sample = from_dict({})
    assert with_caption_langs(sample, ["mr", "hi", "en", "ta", "te"]).data.caption_langs == [
        "mr", "hi", "en"]
    given = from_dict({"data": {"dataset": "/data/own", "caption_langs": ["ta"]}})
    assert with_caption_langs(given, ["en", "ta"]).data.caption_langs == ["ta"]


def test_a_run_on_a_dataset_trains_on_all_its_languages_and_says_so(five_languages, tmp_path,
                                                                     capsys):
    from rudder import train

    train.main(["--dataset", str(five_languages.root), "--output-dir", str(tmp_path / "run"),
                *FAST])
    err = capsys.readouterr().err
    assert ("caption languages: mr, hi, ta, te, en (the dataset's own): 150 of the dataset's "
            "150 captions") in err
    assert read_config(tmp_path / "run")["data"]["caption_langs"] == ["mr", "hi", "ta", "te",
                                                                      "en"]


def test_a_run_with_chosen_languages_says_what_it_leaves_out(five_languages, tmp_path, capsys):
    from rudder import train

    train.main(["--dataset", str(five_languages.root), "--output-dir", str(tmp_path / "run"),
                *FAST, "--set", "data.caption_langs=[mr,hi,en]"])
    err = capsys.readouterr().err
    assert ("caption languages: mr, hi, en (data.caption_langs): 90 of the dataset's 150 "
            "captions; left out: ta (30 captions), te (30 captions) (set "
            "data.caption_langs=[mr,hi,en,ta,te] to use them)") in err
