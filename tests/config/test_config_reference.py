"""docs/config.md is generated from the schema (rudder/config/schema.py) and up to date; it
lists every config field with its real default, and every field is described where it is
declared."""

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rudder.config import TrainConfig, parse_yaml, to_dict
from rudder.config.fields import leaves, setting
from rudder.config.reference import allowed_text, page, section_table, type_text, yaml_value

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


def test_the_committed_page_is_the_generated_one():
    assert PAGE.read_text(encoding="utf-8") == page(), (
        "docs/config.md is out of date: run `python -m rudder.config.reference > docs/config.md`")


def test_the_page_lists_every_field_with_its_default():
    """Read back from the page's rows (not from the generator), so a wrong default or a
    missing or extra row fails even when page() and the file agree."""
    documented = {key: parse_yaml(default) for key, default in ROW.findall(page())}
    assert documented == _fields(to_dict(TrainConfig()))


def test_every_field_has_a_description():
    for key, item, _ in leaves(TrainConfig):
        assert len(item.metadata["doc"]) > 10, key


def test_a_field_declared_with_setting_gets_its_row():
    @dataclasses.dataclass
    class Toy:
        size: int = setting(3, doc="how big")
        tags: list[str] | None = setting(factory=lambda: ["a"], doc="labels")

    assert section_table(Toy, "toy.").splitlines()[2:] == [
        "| `toy.size` | `3` | `int` | any | how big |",
        "| `toy.tags` | `[a]` | `list[str]` or null | any | labels |",
    ]


@pytest.mark.parametrize(("value", "text"), [
    (None, "null"), (True, "true"), (0.001, "0.001"), (["mr", "hi"], "[mr, hi]"), ({}, "{}"),
    ({"all": "v.vec"}, "{all: v.vec}"),
])
def test_defaults_are_written_as_yaml_that_reads_back(value, text):
    assert yaml_value(value) == text and parse_yaml(text) == value


def test_types_and_valid_values_read_from_the_declaration():
    hints = {key: hint for key, _, hint in leaves(TrainConfig)}
    rules = {key: item.metadata["rule"] for key, item, _ in leaves(TrainConfig)}
    assert type_text(hints["optim.grad_clip"]) == "`float` or null"
    assert allowed_text(rules["optim.grad_clip"], hints["optim.grad_clip"]) == ">= 0.0"
    assert allowed_text(rules["supervision.rho"], float) == "(0.0, 1.0]"
    assert allowed_text(rules["seed"], int) == "[0, 2^63 - 1]"
    assert allowed_text(rules["epochs"], int) == "[1, 100,000]"
    assert allowed_text(rules["amp"], bool) == "`true`, `false`"
    assert allowed_text(rules["optim.name"], str) == (
        "`adam`, `adamw`, `sgd` (`rudder.training.optim.OPTIMIZERS`)")


def test_the_generator_runs_as_a_module():
    out = subprocess.run([sys.executable, "-m", "rudder.config.reference"], cwd=PAGE.parents[1],
                         capture_output=True, text=True, encoding="utf-8", check=True).stdout
    assert out == page()
