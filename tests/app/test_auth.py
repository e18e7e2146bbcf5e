"""Logins: repeatable --auth, hashed --auth-file lines, hash-password, each login checked."""

import hashlib
import subprocess
import sys

import pytest

import app.__main__ as cli
from app import auth
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
        ("asha:scrypt$1000$8$1$00$" + "00" * 32, "N=1000 is not a power of 2"),
        ("asha:scrypt$1$8$1$00$" + "00" * 32, "N=1 is not a power of 2"),
        ("asha:scrypt$0$8$1$00$" + "00" * 32, "N=0 is not a power of 2"),
        ("asha:scrypt$1048576$8$1$00$" + "00" * 32, "over the 268435456"),
        ("asha:scrypt$16$1000$1$00$" + "00" * 32, "outside"),
        ("asha:scrypt$16$8$1000$00$" + "00" * 32, "outside"),
        ("asha:scrypt$16$-1$1$00$" + "00" * 32, "not a scrypt hash"),
        ("asha:scrypt$" + "9" * 5000 + "$1$1$00$" + "00" * 32, "not a scrypt hash"),
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


@pytest.mark.parametrize("n, r, p", [(2, 1, 1), (16, 1, 1), (1024, 8, 1), (1024, 4, 3),
                                     (4096, 2, 16)])
def test_the_memory_rule_is_the_one_hashlib_scrypt_applies(n, r, p):
    """scrypt_memory is exactly the least maxmem hashlib.scrypt accepts."""
    need = auth.scrypt_memory(n, r, p)
    hashlib.scrypt(b"x", salt=b"s", n=n, r=r, p=p, maxmem=need, dklen=32)
    with pytest.raises(ValueError, match="memory limit"):
        hashlib.scrypt(b"x", salt=b"s", n=n, r=r, p=p, maxmem=need - 1, dklen=32)


def test_every_accepted_cost_verifies_and_the_limit_is_tight(monkeypatch):
    """The largest N accepted at load still verifies under the verifier's maxmem (shrunk
    here, with the check, so the test stays cheap); the next power of 2 is refused."""
    monkeypatch.setattr(auth, "MAXMEM", 1 << 20)
    n = 2
    while auth.cost_problem(n * 2, 8, 1) is None:
        n *= 2
    assert n == 512 and "over the" in auth.cost_problem(n * 2, 8, 1)
    stored = hash_password("pw", n=n, r=8, p=1)
    assert auth._parse_hash(stored, "here") == stored and verify_password("pw", stored)
    with pytest.raises(ValueError):
        hash_password("pw", n=n * 2, r=8, p=1)


def test_an_unknown_user_costs_one_scrypt_like_a_known_one(tmp_path, monkeypatch):
    path = tmp_path / "users.txt"
    path.write_text(f"chitra:{hash_password('c-pass', **FAST)}\n", encoding="utf-8")
    logins = logins_from(["asha:a-pass"], [path])
    calls = []
    real = auth._scrypt

    def counting(password, salt, n, r, p):
        calls.append((n, r, p))
        return real(password, salt, 16, 1, 1)  # cheap, whatever was asked

    monkeypatch.setattr(auth, "_scrypt", counting)
    assert not logins("nobody", "c-pass")
    assert calls == [(auth.N, auth.R, auth.P)]  # the dummy hash, with the default cost
    assert logins("chitra", "c-pass") and len(calls) == 2
    assert logins("asha", "a-pass") and not logins("asha", "c-pass") and len(calls) == 4
    assert auth.DUMMY_HASH.split("$")[1:4] == [str(auth.N), str(auth.R), str(auth.P)]
