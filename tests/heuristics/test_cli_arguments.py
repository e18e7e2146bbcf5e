"""Bad option values are refused by the parser, before any work, naming the flag (exit 2)."""

import pytest

from heuristics.__main__ import main


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train-tagger", "--max-steps", "0"], "argument --max-steps: 0 is outside [1, 1"),
        (["train-tagger", "--batch-size", "-3"], "--batch-size: -3 is outside [1, 1"),
        (["label", "--alpha-n", "1.5"], "--alpha-n: expected a number in [0, 1]"),
        (["label", "--alpha-v", "-0.1"], "--alpha-v: expected a number in [0, 1]"),
        (["label", "--num-proc", "0"], "argument --num-proc: 0 is outside [1, 1"),
        (["video-relations", "--alpha-o", "2"], "--alpha-o: expected a number in [0, 1]"),
        (["video-relations", "--alpha-a", "x"], "--alpha-a: expected a number in [0, 1]"),
    ],
)
def test_bad_values_name_their_flag(tmp_path, argv, message, capsys):
    inputs = {
        "train-tagger": ["--lang", "en", "--train", "t.conllu", "--dev", "d.conllu"],
        "label": ["--dataset", str(tmp_path), "--tagger", "lexicon"],
        "video-relations": ["--dataset", str(tmp_path), "--sets", "s.csv"],
    }
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, *inputs[argv[0]]])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_a_corrupt_tag_cache_is_named(tmp_path, lexicon_path, capsys):
    cache = tmp_path / "tags.sqlite"
    cache.write_bytes(b"not a database, just some bytes " * 100)
    argv = ["tag", "cut the paper", "--lang", "en", "--tagger", "lexicon"]
    assert main([*argv, "--lexicon", str(lexicon_path), "--cache", str(cache)]) == 2
    err = capsys.readouterr().err
    assert f"error: {cache}: cannot be used as the tag cache (file is not a database)" in err
    assert "delete it, or pass --no-cache" in err
