"""Logins: repeatable --auth, hashed --auth-file lines, hash-password, each login checked."""

import hashlib
import subprocess
import sys

import pytest

import app.__main__ as cli
from app.auth import Logins, hash_password, logins_from, verify_password
from rudder.errors import RunError

FAST = {"n": 2**4, "r": 1, "p": 1}  # cheap scrypt parameters for tests


def test_the_hash_is_rfc7914_scrypt_of_the_password_with_its_salt():
    salt = bytes(range(16))
    stored = hash_password("pässword", salt=salt, **FAST)
    scheme, n, r, p, salt_hex, digest = stored.split("$")
    assert (scheme, n, r, p, salt_hex) == ("scrypt", "16", "1", "1", salt.hex())
    expected = hashlib.scrypt("pässword".encode(), salt=salt, n=16, r=1, p=1, dklen=32)
    assert digest == expected.hex()
    assert verify_password("pässword", stored) and not verify_password("password", stored)
    assert hash_password("x", **FAST) != hash_password("x", **FAST)  # fresh salts


def test_repeated_auth_and_a_file_make_one_login_each(tmp_path):
    path = tmp_path / "users.txt"
    path.write_text(
        "# team\n\n"
        f"chitra:{hash_password('c-pass', **FAST)}\n"
        f"dev:{hash_password('d:pass', **FAST)}\n",
        encoding="utf-8",
    )
    logins = logins_from(["asha:a-pass", "bala:b:pass"], [path])
    assert logins.users == ["asha", "bala", "chitra", "dev"]
    assert logins("asha", "a-pass") and logins("bala", "b:pass")
    assert logins("chitra", "c-pass") and logins("dev", "d:pass")
    assert not logins("asha", "b:pass") and not logins("chitra", "a-pass")
    assert not logins("nobody", "a-pass") and not logins("Asha", "a-pass")
    assert logins_from([], []) is None


@pytest.mark.parametrize(
    "line, message",
    [
        ("asha:secret", "not a scrypt hash"),
        ("asha", "expected USER:scrypt"),
        ("asha:scrypt$16$1$1$zz$00", "not a scrypt hash"),
        (" asha:scrypt$16$1$1$00$" + "00" * 32, None),  # stripped line: accepted
        (":scrypt$16$1$1$00$" + "00" * 32, "bad user name"),
    ],
)
def test_a_bad_auth_file_line_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "users.txt"
    path.write_text(f"# header\n{line}\n", encoding="utf-8")
    if message is None:
        assert Logins().add_file(path) is None
        return
    with pytest.raises(RunError, match=message) as info:
        Logins().add_file(path)
    assert f"{path}, line 2" in str(info.value)
    assert "secret" not in str(info.value)  # a password is never echoed


def test_duplicate_users_and_empty_files_are_refused(tmp_path):
    with pytest.raises(RunError, match="given twice"):
        logins_from(["asha:x", "ASHA:y"], [])
    empty = tmp_path / "empty.txt"
    empty.write_text("# nobody\n", encoding="utf-8")
    with pytest.raises(RunError, match="no user"):
        logins_from([], [empty])
    with pytest.raises(RunError, match="cannot read"):
        logins_from([], [tmp_path / "missing.txt"])


def test_hash_password_command_reads_stdin_and_prints_a_line_the_app_accepts(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "app", "hash-password", "asha"],
        input="open sesame\n",
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert out.startswith("asha:scrypt$") and "open sesame" not in out
    path = tmp_path / "users.txt"
    path.write_text(out, encoding="utf-8")
    logins = cli.parse_auth([], [path])
    assert logins("asha", "open sesame") and not logins("asha", "open")


def test_bad_auth_flags_are_one_error_line(tmp_path, capsys):
    for argv in (["--auth", "asha"], ["--auth-file", str(tmp_path / "none.txt")]):
        with pytest.raises(SystemExit) as info:
            cli.main(argv)
        assert info.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ")
