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
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['batchsize'\] in data\..*'batch_size'"):
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
