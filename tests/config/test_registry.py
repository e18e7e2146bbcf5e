"""rudder.config.registry: the typed registries a config key picks from, declared in the config
and filled by the part above that owns the entries."""

import importlib
import sys
import types

import pytest

from rudder.config import Rule, schema
from rudder.config.fields import leaves
from rudder.config.registry import Registry
from rudder.errors import ConfigError


def test_a_name_is_registered_once():
    registry = Registry("demo.name", "nowhere.DEMO")
    assert registry.register("one", 1) == 1
    with pytest.raises(ValueError, match=r"nowhere.DEMO: 'one' is registered twice"):
        registry.register("one", 2)
    with pytest.raises(ValueError, match="non-empty string"):
        registry.register("", 3)


def test_reading_a_registry_imports_its_owner_first(tmp_path, monkeypatch):
    registry = Registry("demo.name", "demo_owner.DEMO")
    monkeypatch.setitem(sys.modules, "demo_declared", types.SimpleNamespace(DEMO=registry))
    (tmp_path / "demo_owner.py").write_text(
        "from demo_declared import DEMO\nDEMO.register('one', 1)\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert "demo_owner" not in sys.modules
        assert list(registry) == ["one"] and "one" in registry and len(registry) == 1
        assert registry.pick("one") == 1
        with pytest.raises(ConfigError, match=r"demo.name='two' is not valid; expected one of "
                                              r"\['one'\]"):
            registry.pick("two")
    finally:
        sys.modules.pop("demo_owner", None)


def test_a_rule_compares_its_registry_by_identity_without_importing_the_owner():
    registry = Registry("demo.name", "no_such_module.DEMO")
    rule = Rule(registry=registry)
    assert rule == Rule(registry=registry) and hash(rule) == hash(Rule(registry=registry))
    assert rule != Rule(registry=Registry("demo.name", "no_such_module.DEMO"))


def test_every_config_registry_is_the_object_its_owner_names():
    """A rule's registry is what docs/config.md names (``where``), filled by that module."""
    named = {}
    for key, item, _ in leaves(schema.TrainConfig):
        rule = item.metadata.get("rule")
        if rule is not None and rule.registry is not None:
            named[key] = rule.registry
    assert {key: r.key for key, r in named.items()} == {
        "model.name": "model.name",
        "optim.name": "optim.name",
        "optim.scheduler": "optim.scheduler",
        "optim.implementation": "optim.implementation",
    }
    for registry in named.values():
        owner, _, name = registry.where.rpartition(".")
        assert getattr(importlib.import_module(owner), name) is registry
        assert len(registry) > 0
