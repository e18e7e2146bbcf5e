import re

import pytest

from rudder.config import ConfigError, apply_override, from_dict, load_yaml


def test_defaults_and_overrides():
    data = {}
    apply_override(data, "loss.name=po")
    apply_override(data, "loss.params.m1=0.07")
    apply_override(data, "data.caption_langs=[mr, en]")
    apply_override(data, "epochs=3")
    config = from_dict(data)
    assert config.loss.name == "po" and config.loss.params == {"m1": 0.07}
    assert config.data.caption_langs == ["mr", "en"]
    assert config.epochs == 3 and config.data.batch_size == 64


def test_unknown_key_lists_valid_ones():
    with pytest.raises(ConfigError,
                       match=r"unknown key\(s\) \['batchsize'\] in data .*'batch_size'"):
        from_dict({"data": {"batchsize": 3}})
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['lr'\];"):
        from_dict({"lr": 3})


def test_bad_values_are_rejected():
    with pytest.raises(ValueError, match="unsupported language 'fr' in data.caption_langs"):
        from_dict({"data": {"caption_langs": ["fr"]}})
    with pytest.raises(ConfigError, match="optim.scheduler='linear'"):
        from_dict({"optim": {"scheduler": "linear"}})
    with pytest.raises(ConfigError, match="must look like"):
        apply_override({}, "epochs")


def test_yaml_errors_name_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("epochs: [1,\n")
    with pytest.raises(ConfigError, match="bad.yaml: invalid YAML"):
        load_yaml(path)
    with pytest.raises(ConfigError, match="does not exist"):
        load_yaml(tmp_path / "missing.yaml")


@pytest.mark.parametrize(("key", "value", "valid"), [
    ("data.batch_size", "abc", "an integer >= 2"),
    ("data.batch_size", 1, ">= 2"),
    ("data.batch_size", 2.5, "an integer >= 2"),
    ("optim.lr", "fast", "a finite number >= 0.0"),
    ("optim.lr", -0.1, ">= 0.0"),
    ("supervision.alpha_n", 2, "in [0.0, 1.0]"),
    ("supervision.alpha_v", -0.5, "in [0.0, 1.0]"),
    ("optim.momentum", 1.0, "in [0.0, 1.0)"),
    ("supervision.rho", 0.0, "in (0.0, 1.0]"),
    ("epochs", True, "an integer in [1, 100000]"),
    ("amp", 1, "true or false"),
    ("selection", "t2v.R7", "one of ['t2v.gmean_r5_r10_r50'"),
    ("selection", "R1", "one of ['t2v.gmean_r5_r10_r50'"),
    ("data.caption_langs", "mr", "a list of codes"),
    ("data.experts", "object", "a list of strings or null"),
    ("model.shared_dim", "big", "an integer"),
    ("loss.params", [1], "a mapping"),
])
def test_types_and_ranges_name_the_key_and_the_valid_values(key, value, valid):
    data = {}
    section, _, name = key.rpartition(".")
    (data.setdefault(section, {}) if section else data)[name] = value
    with pytest.raises(ConfigError) as error:
        from_dict(data)
    message = str(error.value)
    assert message.startswith((f"{key}=", f"{key}: "))  # model.* checks its own
    assert valid in message and "\n" not in message


def test_values_are_coerced_to_the_field_types():
    config = from_dict({"optim": {"lr": "1e-3", "weight_decay": 0, "grad_clip": None}})
    assert config.optim.lr == 0.001 and isinstance(config.optim.weight_decay, float)
    assert config.optim.grad_clip is None


def test_every_rule_names_an_existing_key():
    from rudder.config import RULES, TrainConfig, to_dict

    defaults = to_dict(TrainConfig())
    for key in RULES:
        node = defaults
        for part in key.split("."):
            node = node[part]


def test_every_valid_selection_is_scored():
    """The SELECTIONS accepted here are exactly what the trainer can score."""
    from rudder.config import SELECTIONS
    from rudder.evaluation.selection import selection_score

    values = {"R1": 10.0, "R5": 20.0, "R10": 30.0, "R50": 60.0, "MdR": 4.0, "MnR": 8.0,
              "geometric_mean": 18.2, "nDCG": 40.0, "mAP": 25.0}
    result = {"t2v": values, "v2t": values}
    for selection in SELECTIONS:
        assert isinstance(selection_score(result, selection), float)


def test_bad_override_values_are_config_errors():
    with pytest.raises(ConfigError, match=r"override 'epochs=\[1,': the value is not valid YAML"):
        apply_override({}, "epochs=[1,")
    with pytest.raises(ConfigError, match="data must be a mapping, got 3"):
        from_dict({"data": 3})


@pytest.mark.parametrize("value", [".inf", ".nan", "inf"])
def test_numbers_must_be_finite(value):
    data = {}
    apply_override(data, f"optim.lr={value}")
    with pytest.raises(ConfigError,
                       match="optim.lr=.* is not valid; expected a finite number >= 0.0"):
        from_dict(data)


@pytest.mark.parametrize(("raw", "value"), [
    ("1e-1", 0.1), ("5E-2", 0.05), ("-1.5e+2", -150.0), (".5", 0.5), ("010", 10), ("0x1F", 31),
    ("+5", 5), ("yes", "yes"), ("off", "off"), ("1:30", "1:30"), ("2024-01-01", "2024-01-01"),
    ("true", True), ("False", False), ("null", None), ("[1e-3, 2]", [0.001, 2]),
])
def test_values_are_read_as_yaml_1_2(raw, value):
    """PyYAML's YAML 1.1 reads 1e-1 as a string, 010 as 8, yes as true and 1:30 as 90."""
    data = {}
    apply_override(data, f"x={raw}")
    assert data["x"] == value and type(data["x"]) is type(value)


def test_loss_parameters_take_scientific_notation(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("loss:\n  name: po\n  params: {m1: 5e-2, m2: 1.5e-1}\n", encoding="utf-8")
    assert from_dict(load_yaml(path)).loss.params == {"m1": 0.05, "m2": 0.15}
    data = {}
    apply_override(data, "loss.params.margin=1e-1")
    assert from_dict(data).loss.params == {"margin": 0.1}


def test_loss_errors_are_config_errors():
    with pytest.raises(ConfigError, match=r"loss: loss 'mm' got unknown parameter\(s\) marign"):
        from_dict({"loss": {"name": "mm", "params": {"marign": 0.1}}})


def test_unknown_keys_suggest_the_nearest_one():
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['los'\] \(did you mean 'loss'\?\)"):
        from_dict({"los": {"name": "mm"}})
    with pytest.raises(ConfigError, match=r"\['momentun'\] in optim \(did you mean 'momentum'"):
        from_dict({"optim": {"momentun": 0.1}})


def test_a_string_field_given_another_type_says_to_quote_it():
    with pytest.raises(ConfigError, match=r"name=True is not valid; expected a string \(quote"):
        from_dict({"name": True})


def test_a_saved_config_reads_back_equal():
    """config.yaml is written for the YAML 1.2 reader: strings it would read as numbers are
    quoted ('09' was saved bare and came back as 9, failing --resume)."""
    from rudder.config import TrainConfig, dump_yaml, parse_yaml, to_dict

    for name in ("09", "1e3", "-.5", "0o7", "0x1F", "yes", "off", "1:30", "true", "null", "x"):
        data = to_dict(TrainConfig())
        data["name"], data["optim"]["lr"] = name, 1e-05
        assert parse_yaml(dump_yaml(data)) == data


def test_a_run_config_file_round_trips(tmp_path):
    from rudder.config import TrainConfig, to_dict
    from rudder.runs.layout import read_config, write_config

    config = from_dict({"name": "09", "data": {"dataset": "1e3"}})
    write_config(tmp_path, config)
    assert read_config(tmp_path) == to_dict(config)
    assert from_dict(read_config(tmp_path)) == config != TrainConfig()


@pytest.mark.parametrize(("settings", "named"), [
    ({}, "supervision.manual_relations=True (got False)"),
    ({"manual_relations": True, "positive_sampling": "relevant"},
     "supervision.positive_sampling='own' (got 'relevant')"),
    ({"manual_relations": True, "caption_sampling": "all"},
     "data.caption_sampling='random' (got 'all')"),
])
def test_relation_batches_name_what_they_need(settings, named):
    """Relevant positives replaced the paired captions (0 of 203 pairs left together);
    caption_sampling=all failed only at the first epoch with a message naming no setting."""
    from rudder.config import check_new_run

    sampling = settings.pop("caption_sampling", "random")
    config = from_dict({"supervision": {"relation_batches": True, **settings},
                        "data": {"caption_sampling": sampling}})
    with pytest.raises(ConfigError, match=rf"relation_batches needs .*{re.escape(named)}"):
        check_new_run(config)
    check_new_run(from_dict({"supervision": {"relation_batches": True, "manual_relations": True}}))


def test_a_model_config_field_declared_without_setting_is_type_checked():
    """A new model's config (docs/architecture.md, 'How to extend') may add plain dataclass
    fields: they have no rule and no description, but their type is still checked."""
    from dataclasses import dataclass

    from rudder.config import ModelConfig

    @dataclass
    class WiderConfig(ModelConfig):
        extra_layers: int = 2

    assert WiderConfig().extra_layers == 2
    with pytest.raises(ConfigError, match="model.extra_layers='x' is not valid"):
        WiderConfig(extra_layers="x")
