"""Bad inputs that ended in a traceback or started work: each is one
``error:`` line naming the value and the fix, exit code 2, before any work."""

from __future__ import annotations

import pytest

from rudder import train


def _refused(main, argv, capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2, err
    assert len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in err[0], err
    return err[0]


@pytest.fixture
def no_training(monkeypatch):
    monkeypatch.setattr(train, "run", lambda *a, **k: pytest.fail("training started"))


@pytest.mark.parametrize("content, expected", [
    (bytes(range(256)), "is not UTF-8 text (byte 0x80 at offset 128); save it as UTF-8"),
    ("name: caf\xe9\n".encode("latin-1"), "is not UTF-8 text (byte 0xe9 at offset 9)"),
], ids=["binary", "latin-1"])
def test_a_config_file_that_is_not_utf8(tmp_path, capsys, no_training, content, expected):
    config = tmp_path / "c.yaml"
    config.write_bytes(content)
    line = _refused(train.main, ["--config", str(config)], capsys)
    assert f"config file {config} {expected}" in line


def test_a_config_that_is_a_folder_or_too_big(tmp_path, capsys, no_training):
    from rudder.config import MAX_CONFIG_BYTES

    assert "is a folder; name a YAML file" in _refused(train.main, ["--config", str(tmp_path)],
                                                       capsys)
    big = tmp_path / "big.yaml"
    big.write_text("# padding\n" * (MAX_CONFIG_BYTES // 10 + 1))
    line = _refused(train.main, ["--config", str(big)], capsys)
    assert f"config file {big} has" in line and f"over the limit of {MAX_CONFIG_BYTES:,d}" in line


@pytest.mark.parametrize("flags", [["--seed", str(2**64)], ["--seeds", "1", str(2**70)],
                                   ["--seed", "-1"]])
def test_seeds_beyond_63_bits(capsys, no_training, flags):
    assert "outside [0, 9223372036854775807]" in _refused(train.main, flags, capsys)


def test_a_seed_set_in_the_config_is_bounded_too(capsys, no_training):
    line = _refused(train.main, ["--set", f"seed={2**64}"], capsys)
    assert "seed=18446744073709551616 is not valid; expected in [0, 9223372036854775807]" in line


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self"), reason="needs /proc")
def test_an_output_dir_that_cannot_be_made(tmp_path, capsys, no_training):
    line = _refused(train.main, ["--output-dir", "/proc/x"], capsys)
    assert "--output-dir /proc/x: cannot create a folder in /proc" in line
    taken = tmp_path / "file"
    taken.write_text("x")
    assert "is a file, not a folder" in _refused(train.main, ["--output-dir", str(taken)], capsys)


def test_resume_before_the_first_checkpoint_says_overwrite(tmp_path, capsys, no_training):
    (tmp_path / "run").mkdir()
    line = _refused(train.main, ["--output-dir", str(tmp_path / "run"), "--resume"], capsys)
    assert "checkpoints/last.pt does not exist" in line
    assert "start it again with --overwrite instead of --resume" in line


def test_app_port_is_checked_before_the_model_loads(capsys, monkeypatch):
    import app.__main__ as app_cli

    monkeypatch.setattr(app_cli, "_build", lambda args: pytest.fail("the model was loaded"))
    line = _refused(app_cli.main, ["--port", "99999"], capsys)
    assert "argument --port: 99999 is outside [1, 65535]" in line
