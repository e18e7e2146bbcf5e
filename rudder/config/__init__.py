"""Run configuration: YAML files mapped onto dataclasses, with dotted overrides.

Every field is reachable as ``--set section.field=value`` on the CLI; unknown keys are an
error that lists the valid ones. ``loss.params`` is a free dict checked by
:func:`rudder.losses.build`, and ``model`` is :class:`ModelConfig`.

One job per module:

- :mod:`~rudder.config.fields`: :func:`~rudder.config.fields.setting` declares a field with
  its rule and description, :class:`Rule` the valid values;
- :mod:`~rudder.config.schema`: the dataclasses, every field declared once (type, default,
  rule, description);
- :mod:`~rudder.config.coerce`: values made into the field types, ``--set`` overrides;
- :mod:`~rudder.config.validate`: :func:`from_dict`, the checks of a whole config;
- :mod:`~rudder.config.yaml_io`: the YAML 1.2 core-schema reader and writer;
- :mod:`~rudder.config.reference`: docs/config.md, generated from the schema
  (``python -m rudder.config.reference``).
"""

from rudder.config.coerce import apply_override
from rudder.config.fields import Rule
from rudder.config.schema import (
    MAX_EPOCHS,
    MAX_SEED,
    RULES,
    SAMPLE_CAPTION_LANGS,
    SELECTIONS,
    DataConfig,
    LossConfig,
    ModelConfig,
    OptimConfig,
    SupervisionConfig,
    TrainConfig,
    resolved_config,
    to_dict,
    with_caption_langs,
)
from rudder.config.validate import check_new_run, from_dict
from rudder.config.yaml_io import MAX_CONFIG_BYTES, dump_yaml, load_yaml, parse_yaml
from rudder.errors import ConfigError

__all__ = ["MAX_CONFIG_BYTES", "MAX_EPOCHS", "MAX_SEED", "RULES", "SAMPLE_CAPTION_LANGS",
           "SELECTIONS", "ConfigError", "DataConfig", "LossConfig", "ModelConfig", "OptimConfig",
           "Rule",
           "SupervisionConfig", "TrainConfig", "apply_override", "check_new_run", "dump_yaml",
           "from_dict", "load_yaml", "parse_yaml", "resolved_config", "to_dict",
           "with_caption_langs"]
