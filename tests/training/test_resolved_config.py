"""The trainer works on a resolved copy of the config (what the run supplies filled in),
saves that copy as config.yaml and leaves the caller's config as it was."""

import copy

from rudder.config import dump_yaml, from_dict, resolved_config, to_dict
from rudder.runs.layout import config_file
from rudder.training.distributed import DistContext
from rudder.training.trainer import Trainer

from ..factories import tiny_config, write_ce_text_features


def test_resolved_config_fills_a_copy():
    config = from_dict({"loss": {"name": "dw", "params": {"margin": 0.1}}})
    before = copy.deepcopy(config)
    resolved = resolved_config(config, {"dim": 4}, word_dim=6, text_input_dim=5)
    assert config == before
    assert resolved.loss.params == {"margin": 0.1, "dim": 4}  # given first, then supplied
    assert (resolved.model.word_dim, resolved.model.text_input_dim) == (6, 5)
    assert resolved.data == config.data and resolved.data is not config.data
    assert resolved_config(config, {}) == config  # nothing supplied: an equal copy


def test_the_callers_config_is_left_unchanged(tiny_dataset, tmp_path):
    config = tiny_config(tiny_dataset, "dw")
    before = copy.deepcopy(config)
    run = Trainer(config, tmp_path / "a", DistContext())
    assert config == before and config.loss.params == {}
    assert run.config.loss.params == {"dim": 16} and run.loss_fn.dim == 16
    run.config.data.caption_langs.append("hi")  # nothing is shared with the caller's object
    assert config.data.caption_langs == ["mr", "en"]


def test_the_text_encoders_size_goes_into_the_copy(tiny_dataset, tmp_path):
    path = write_ce_text_features(tiny_dataset, tmp_path / "w2v_tiny.pickle", tokens=2)
    config = tiny_config(tiny_dataset, data={"text_encoder": str(path), "caption_langs": ["en"]})
    run = Trainer(config, tmp_path / "run", DistContext())
    assert run.config.model.text_input_dim == 5 and config.model.text_input_dim is None


def test_the_saved_config_is_the_resolved_copy(tiny_dataset, tmp_path):
    """A run whose loss takes nothing from the run (the default mm) saves the caller's config
    unchanged; dw's saves the dimension it was given."""
    for loss, supplied in (("mm", {}), ("dw", {"dim": 16})):
        config = tiny_config(tiny_dataset, loss, epochs=1)
        run = Trainer(config, tmp_path / loss, DistContext())
        run.fit()
        expected = to_dict(config)
        expected["loss"]["params"] = supplied
        assert config_file(tmp_path / loss).read_text(encoding="utf-8") == dump_yaml(expected)
