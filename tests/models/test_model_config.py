"""ModelConfig: defaults, validation and from_dict."""

import pytest

from rudder.models import ModelConfig


def test_defaults_are_valid_and_round_trip():
    config = ModelConfig()
    assert config.include_self is True and config.gating_hidden_layers == 0
    assert ModelConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    "field, value",
    [
        ("shared_dim", 0),
        ("word_dim", 2.5),
        ("text_vlad_clusters", True),
        ("video_vlad_clusters", -1),
        ("vlad_ghost_clusters", -1),
        ("gating_g_layers", 0),
        ("gating_hidden_layers", -1),
        ("gating_activation", "tanh"),
        ("include_self", 1),
        ("use_batchnorm", "yes"),
        ("dropout", 1.0),
        ("dropout", -0.1),
        ("freeze_embeddings", None),
        ("text_input_dim", 0),
    ],
)
def test_invalid_values_name_the_field(field, value):
    with pytest.raises(ValueError, match=f"model.{field}"):
        ModelConfig(**{field: value})


def test_unknown_fields_are_listed_with_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['clusters'\].*shared_dim"):
        ModelConfig.from_dict({"clusters": 3, "shared_dim": 8})
