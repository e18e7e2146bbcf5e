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
MAXMEM = 256 * 1024 * 1024  # the most memory one check may take (hashlib.scrypt's maxmem)
MAX_R, MAX_P = 64, 16  # sane bounds on scrypt's block size and parallelism
# What an unknown user name is checked against, so it costs one default scrypt like a known
# one and the time of a failed login does not tell whether the name exists.
DUMMY_HASH = f"{SCHEME}${N}${R}${P}${'00' * SALT_BYTES}${'00' * HASH_BYTES}"


def hash_password(password: str, salt: bytes | None = None, n: int = N, r: int = R,
                  p: int = P) -> str:
    """``scrypt$N$R$P$SALT$HASH`` of ``password`` (a fresh random salt unless given)."""
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    digest = _scrypt(password, salt, n, r, p)
    return f"{SCHEME}${n}${r}${p}${salt.hex()}${digest.hex()}"


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(password.encode("utf-8"), salt=salt, n=n, r=r, p=p,
                          maxmem=MAXMEM, dklen=HASH_BYTES)


def scrypt_memory(n: int, r: int, p: int) -> int:
    """Bytes :func:`hashlib.scrypt` needs, as OpenSSL counts them against ``maxmem``:
    ``128*r*p`` for B plus ``128*r*(N+2)`` for V and its scratch (OpenSSL
    crypto/evp/pbe_scrypt.c, ``Blen + Vlen``)."""
    return 128 * r * p + 128 * r * (n + 2)


def cost_problem(n: int, r: int, p: int) -> str | None:
    """Why ``scrypt`` with ``N, r, p`` would fail or be unreasonable here; None when fine."""
    if n < 2 or n & (n - 1):
        return f"N={n} is not a power of 2 greater than 1"
    if not 1 <= r <= MAX_R or not 1 <= p <= MAX_P:
        return f"r={r}, p={p} are outside 1..{MAX_R} and 1..{MAX_P}"
    if scrypt_memory(n, r, p) > MAXMEM:
        return (f"N={n}, r={r}, p={p} need {scrypt_memory(n, r, p)} bytes, over the "
                f"{MAXMEM} a check may take")
    return None


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
        ok = (len(parts) == 6 and parts[0] == SCHEME
              and all(x.isascii() and x.isdigit() and len(x) < 20 for x in parts[1:4])
              and bytes.fromhex(parts[4]) and len(bytes.fromhex(parts[5])) == HASH_BYTES)
    except ValueError:
        ok = False
    if not ok:
        raise RunError(f"{where}: the password is not a {SCHEME} hash (USER:{SCHEME}$N$R$P$SALT"
                       "$HASH); write the line with `python -m app hash-password USER`")
    problem = cost_problem(*(int(x) for x in parts[1:4]))
    if problem:
        raise RunError(f"{where}: bad {SCHEME} parameters: {problem}; write the line with "
                       "`python -m app hash-password USER`")
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
        """Whether ``password`` is ``user``'s. A user that is unknown (or has a plain
        ``--auth`` password) costs one scrypt of :data:`DUMMY_HASH` too, so the time taken
        does not tell which user names exist."""
        password = str(password)
        stored = self._hashed.get(user)
        if stored is not None:
            return verify_password(password, stored)
        verify_password(password, DUMMY_HASH)
        plain = self._plain.get(user)
        return plain is not None and hmac.compare_digest(plain.encode(), password.encode())


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
