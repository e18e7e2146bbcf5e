"""``build videos --engine ray``: on a Ray instance started on this machine, the same bytes
as the one-process build, mixing with the local engine's shards; a missing extra is one
``error:`` line (``datasets_scripts.video_ray``)."""

import shutil
import sys

import pytest

pytest.importorskip("av")

from .test_videos_build import FAST, build, folder_bytes, source  # noqa: F401 - a fixture


@pytest.mark.slow
def test_ray_engine_writes_the_same_bytes_and_shares_the_parts(source, tmp_path,  # noqa: F811
                                                               monkeypatch, capsys):
    pytest.importorskip("ray.data")
    monkeypatch.setenv("RAY_ADDRESS", "local")  # a Ray of its own, never another's cluster
    src, captions = source
    out = tmp_path / "out"
    assert build(src, captions, out, *FAST, "--workers", "0") == 0
    reference = folder_bytes(out)
    shutil.rmtree(out)
    # one shard by the local engine, the other by Ray: one parts folder, one dataset
    assert build(src, captions, out, *FAST, "--shard", "1/2", "--workers", "0") == 0
    assert not out.exists()
    capsys.readouterr()
    assert build(src, captions, out, *FAST, "--shard", "0/2", "--engine", "ray") == 0
    err = capsys.readouterr().err
    assert "4/4 [" in err  # its own files (a, bad, d, vfr: the sorted stems 0::2)
    assert folder_bytes(out) == reference
    # resuming: every part is there, so Ray is not even started
    shutil.rmtree(out)
    assert build(src, captions, out, *FAST, "--engine", "ray") == 0
    assert "resuming: 7 of 7 file(s) already done" in capsys.readouterr().err
    assert folder_bytes(out) == reference


def test_without_ray_the_extra_is_named(source, tmp_path, monkeypatch, capsys):  # noqa: F811
    monkeypatch.setitem(sys.modules, "ray", None)
    src, captions = source
    assert build(src, captions, tmp_path / "out", *FAST, "--engine", "ray") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ray (for --engine ray) is not installed")
    assert 'pip install -e ".[ray]"' in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.parts").exists()
