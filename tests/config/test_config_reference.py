"""docs/config.md lists every config field, with its real default, and nothing else."""

import re
from pathlib import Path

from rudder.config import TrainConfig, parse_yaml, to_dict

PAGE = Path(__file__).resolve().parents[2] / "docs" / "config.md"
ROW = re.compile(r"^\| `([\w.]+)` \| `([^`]*)` \|", re.MULTILINE)
LEAVES = ("params", "word_vectors")  # mappings that are values, not sections


def _fields(node: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in node.items():
        if isinstance(value, dict) and key not in LEAVES:
            out.update(_fields(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def test_the_page_lists_every_field_with_its_default():
    documented = {key: parse_yaml(default) for key, default in ROW.findall(PAGE.read_text())}
    assert documented == _fields(to_dict(TrainConfig()))
