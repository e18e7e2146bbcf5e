"""TrainedModel: the one way to get a usable model, and its text side the one query encoding."""

import ast
from pathlib import Path

import pytest
import torch

from rudder.data.layout import DatasetFolder
from rudder.data.loader import build_vocabulary, select_experts
from rudder.errors import RunError
from rudder.runs.layout import checkpoint_file
from rudder.runs.trained_model import TrainedModel, token_inputs
from rudder.text import tokenize
from tests.factories import tiny_config

REPO = Path(__file__).resolve().parents[2]


def calls_of_models_build(path: Path) -> int:
    """Calls ``<anything>.build(...)`` on a name bound to ``rudder.models`` in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound = {alias.asname or alias.name for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom) and node.module == "rudder"
             for alias in node.names if alias.name == "models"}
    return sum(1 for node in ast.walk(tree)
               if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr == "build" and isinstance(node.func.value, ast.Name)
               and node.func.value.id in bound)


def test_models_build_is_called_in_one_place_only():
    calls = {str(p.relative_to(REPO)): n for p in sorted((REPO / "rudder").rglob("*.py"))
             if (n := calls_of_models_build(p))}
    assert calls == {"rudder/runs/weights.py": 1}  # new_network


def test_the_check_counts_a_call_of_models_build(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f(c):\n    from rudder import models\n    return models.build(c)\n")
    assert calls_of_models_build(module) == 1


def new_model(dataset, run_dir, seed=0):
    folder = DatasetFolder(dataset)
    config = tiny_config(dataset)
    names = select_experts(folder, config.data.experts, config.data.audio_langs)
    torch.manual_seed(seed)
    return TrainedModel.new(config, {e: folder.meta.experts[e] for e in names},
                            build_vocabulary(folder, ["mr", "en"]), folder, run_dir)


@pytest.fixture
def fresh(tiny_dataset, tmp_path):
    return new_model(tiny_dataset, tmp_path / "run")


def test_a_new_model_is_built_from_its_config(fresh, tiny_dataset, tmp_path):
    assert fresh.checkpoint == checkpoint_file(tmp_path / "run", "best")
    assert fresh.experts == sorted(fresh.experts) and fresh.fingerprint == ""
    rows = fresh.model.state_dict()
    assert any(t.shape[:1] == (fresh.vocab.table_size,) for t in rows.values())  # token table
    assert any(fresh.config.model.shared_dim in t.shape for t in rows.values())
    again = new_model(tiny_dataset, tmp_path / "run")  # the same seed: the same weights
    assert all(torch.equal(t, again.model.state_dict()[n]) for n, t in rows.items())
    other = new_model(tiny_dataset, tmp_path / "run", seed=1)
    assert not all(torch.equal(t, other.model.state_dict()[n]) for n, t in rows.items())


def test_queries_are_tokenised_per_language_as_training_captions(fresh):
    texts, langs = ["कागदाची बाटली कापा", "cut the bottle", "unknownword"], ["mr", "en", "en"]
    ids, mask = fresh.encode_queries(texts, langs)
    expected = fresh.vocab.batch([tokenize(t, lang) for t, lang in zip(texts, langs, strict=True)],
                                 max_len=fresh.config.data.max_words)
    assert torch.equal(ids, expected[0]) and torch.equal(mask, expected[1])
    same = token_inputs(fresh.vocab, texts, langs, fresh.config.data.max_words)  # the app's
    assert torch.equal(same[0], ids) and fresh.reads_tokens and fresh.text_encoder is None


def test_a_model_without_a_checkpoint_is_refused(tmp_path):
    with pytest.raises(RunError):
        TrainedModel.from_checkpoint(tmp_path / "nothing")
