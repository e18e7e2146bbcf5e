"""Logins of the app: ``--auth USER:PASS`` (repeatable) and ``--auth-file FILE``.

An auth file holds one user a line, ``USER:scrypt$N$R$P$SALT$HASH`` (salt and hash in hex),
written by ``python -m app hash-password USER``; blank lines and lines starting with ``#``
are skipped. The hash is scrypt (RFC 7914, :func:`hashlib.scrypt`) of the UTF-8 password with
a random 16-byte salt, so the file never holds a password. :class:`Logins` checks a login in
constant time (:func:`hmac.compare_digest`) and is what Gradio's ``auth=`` calls.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

from rudder.errors import RunError

SCHEME = "scrypt"
N, R, P = 2**14, 8, 1  # scrypt's interactive-login cost (RFC 7914 section 2; ~16 MiB, ~50 ms)
SALT_BYTES, HASH_BYTES = 16, 32
MAX_USER = 100


def hash_password(password: str, salt: bytes | None = None, n: int = N, r: int = R,
                  p: int = P) -> str:
    """``scrypt$N$R$P$SALT$HASH`` of ``password`` (a fresh random salt unless given)."""
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    digest = _scrypt(password, salt, n, r, p)
    return f"{SCHEME}${n}${r}${p}${salt.hex()}${digest.hex()}"


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(password.encode("utf-8"), salt=salt, n=n, r=r, p=p,
                          maxmem=256 * 1024 * 1024, dklen=HASH_BYTES)


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` hashes to ``stored`` (an :func:`hash_password` string)."""
    scheme, n, r, p, salt, digest = stored.split("$")
    if scheme != SCHEME:
        return False
    computed = _scrypt(password, bytes.fromhex(salt), int(n), int(r), int(p))
    return hmac.compare_digest(computed, bytes.fromhex(digest))


def check_user(user: str, where: str) -> str:
    """A user name: non-empty, no ':' or surrounding spaces, at most ``MAX_USER`` characters."""
    if not user or user != user.strip() or ":" in user or len(user) > MAX_USER:
        raise RunError(f"{where}: bad user name {user!r} (1 to {MAX_USER} characters, no ':' "
                       "and no surrounding spaces)")
    return user


def _parse_hash(text: str, where: str) -> str:
    parts = text.split("$")
    try:
        ok = (len(parts) == 6 and parts[0] == SCHEME and all(int(x) > 0 for x in parts[1:4])
              and bytes.fromhex(parts[4]) and len(bytes.fromhex(parts[5])) == HASH_BYTES)
    except ValueError:
        ok = False
    if not ok:
        raise RunError(f"{where}: the password is not a {SCHEME} hash (USER:{SCHEME}$N$R$P$SALT"
                       "$HASH); write the line with `python -m app hash-password USER`")
    return text


class Logins:
    """User name -> how to check its password; called by Gradio as ``auth(user, password)``."""

    def __init__(self):
        self._plain: dict[str, str] = {}
        self._hashed: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._plain) + len(self._hashed)

    @property
    def users(self) -> list[str]:
        return sorted([*self._plain, *self._hashed])

    def _add(self, user: str, where: str) -> None:
        if any(u.casefold() == user.casefold() for u in self.users):
            raise RunError(f"{where}: user {user!r} is given twice (names are compared "
                           "ignoring case, since each user is one annotator)")

    def add_plain(self, value: str) -> None:
        """One ``--auth USER:PASS`` value."""
        user, sep, password = value.partition(":")
        if not sep or not user or not password:
            raise RunError("--auth must look like user:pass (both non-empty)")
        self._add(check_user(user, "--auth"), "--auth")
        self._plain[user] = password

    def add_file(self, path: Path) -> None:
        """Every ``USER:HASH`` line of an auth file."""
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as error:
            raise RunError(f"--auth-file {path}: cannot read it ({error})") from None
        count = 0
        for number, line in enumerate(lines, start=1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            where = f"--auth-file {path}, line {number}"
            user, sep, stored = line.partition(":")
            if not sep:
                raise RunError(f"{where}: expected USER:{SCHEME}$...; write the line with "
                               "`python -m app hash-password USER`")
            check_user(user, where)
            self._add(user, where)
            self._hashed[user] = _parse_hash(stored, where)
            count += 1
        if not count:
            raise RunError(f"--auth-file {path}: no user in it (one USER:HASH a line; "
                           "`python -m app hash-password USER` writes one)")

    def __call__(self, user: str, password: str) -> bool:
        if user in self._plain:
            return hmac.compare_digest(self._plain[user].encode(), str(password).encode())
        if user in self._hashed:
            return verify_password(str(password), self._hashed[user])
        return False


def logins_from(auth_values, auth_files) -> Logins | None:
    """The logins of the ``--auth`` values and ``--auth-file`` paths; None when there are none."""
    logins = Logins()
    for value in auth_values or ():
        logins.add_plain(value)
    for path in auth_files or ():
        logins.add_file(path)
    return logins if len(logins) else None


def hash_password_cli(argv: list[str]) -> None:
    """``python -m app hash-password USER``: print an auth-file line for USER.

    The password is read without echo from the terminal (asked twice), or as the first line
    of standard input when it is not a terminal.
    """
    import argparse
    import getpass
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m app hash-password",
        description="Print USER:HASH, a line for --auth-file (the password is never echoed).",
    )
    parser.add_argument("user")
    args = parser.parse_args(argv)
    user = check_user(args.user, "hash-password")
    if sys.stdin.isatty():
        password = getpass.getpass(f"Password for {user}: ")
        if getpass.getpass("Again: ") != password:
            raise RunError("the two passwords differ")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise RunError("empty password")
    print(f"{user}:{hash_password(password)}")
