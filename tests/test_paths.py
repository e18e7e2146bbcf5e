"""One cache folder for every cache: $RUDDER_CACHE, or ~/.cache/rudder when unset or empty."""

from pathlib import Path

import pytest

from heuristics.taggers import default_cache_path as tag_cache_path
from heuristics.taggers import model_dir
from rudder.data.sample import cache_root
from rudder.search.index_cache import default_cache_dir
from rudder.translate import default_cache_path


@pytest.mark.parametrize("value", [None, ""])
def test_unset_or_empty_means_the_home_cache(monkeypatch, value, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("STANZA_RESOURCES_DIR", raising=False)
    if value is None:
        monkeypatch.delenv("RUDDER_CACHE", raising=False)
    else:
        monkeypatch.setenv("RUDDER_CACHE", value)
    home = tmp_path / ".cache" / "rudder"
    assert cache_root() == home and default_cache_dir() == home / "index"
    assert model_dir() == home / "stanza" and tag_cache_path() == home / "tags.sqlite"
    assert Path(default_cache_path()).parent == home


def test_rudder_cache_moves_every_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("RUDDER_CACHE", str(tmp_path))
    monkeypatch.delenv("STANZA_RESOURCES_DIR", raising=False)
    assert cache_root() == tmp_path and default_cache_dir() == tmp_path / "index"
    assert model_dir() == tmp_path / "stanza" and Path(default_cache_path()).parent == tmp_path
