"""Logins of the app: ``--auth USER:PASS`` (repeatable) and ``--auth-file FILE``.

An auth file holds one user a line, ``USER:scrypt$N$R$P$SALT$HASH`` (salt and hash in hex),
written by ``python -m app hash-password USER``; blank lines and lines starting with ``#``
are skipped. The hash is scrypt (RFC 7914, :func:`hashlib.scrypt`) of the UTF-8 password with
a random 16-byte salt, so the file never holds a password. :class:`Logins` checks a login in
constant time (:func:`hmac.compare_digest`).

Gradio's ``auth=`` gets :meth:`Logins.login`, a coroutine: it asks :class:`LoginThrottle`
whether the user name and the client address (:data:`CLIENT_ADDRESS`, set for each request
by :class:`ClientAddress`) may try now, and verifies the password on a small thread pool
(:data:`LOGIN_WORKERS` threads at a lower CPU priority), never on the event loop, so a flood
of logins does not hold up other users' searches. The throttling policy is
:class:`LoginThrottle`'s docstring; a throttled attempt is answered after
:data:`REFUSAL_DELAY` seconds (an ``asyncio`` wait, no thread), which slows a flooding
client down without costing the server anything.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from rudder.errors import RunError

log = logging.getLogger(__name__)

SCHEME = "scrypt"
N, R, P = 2**14, 8, 1  # scrypt's interactive-login cost (RFC 7914 section 2; ~16 MiB, ~50 ms)
SALT_BYTES, HASH_BYTES = 16, 32
MAX_USER = 100
MAXMEM = 256 * 1024 * 1024  # the most memory one check may take (hashlib.scrypt's maxmem)
MAX_R, MAX_P = 64, 16  # sane bounds on scrypt's block size and parallelism
FREE_FAILURES = 5  # failed logins per user name and per client address before any delay
FIRST_DELAY = 1.0  # seconds to wait after the FREE_FAILURES-th failure; doubled after each
MAX_DELAY = 60.0  # the longest wait
FORGET_AFTER = 3600.0  # seconds without an attempt after which a name or address starts afresh
MAX_TRACKED = 100_000  # names and addresses remembered (the least recently tried dropped)
LOGIN_WORKERS = 2  # threads verifying passwords (each scrypt takes ~16 MiB and ~50 ms)
LOGIN_NICENESS = 10  # how much lower the login threads' CPU priority is than the server's
REFUSAL_DELAY = 1.0  # seconds before a throttled attempt is answered (the connection waits)
# the client address of the request being served (set by ClientAddress)
CLIENT_ADDRESS: ContextVar[str | None] = ContextVar("rudder_client_address", default=None)
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


@dataclass
class _Attempts:
    failures: int = 0  # attempts counted as failed (one in progress counts until it succeeds)
    last: float = 0.0  # clock time of the latest counted attempt
    said: bool = False  # the refusal of the current wait was logged


class LoginThrottle:
    """Failed logins per user name (compared ignoring case) and per client address.

    Every attempt counts as a failure of both its name and its address until it succeeds
    (so attempts in flight count too); a success clears the name's count and takes that
    attempt back from the address's. After :data:`FREE_FAILURES` failures of a name or an
    address, its next attempt must wait :data:`FIRST_DELAY` seconds after the latest, doubled
    with each further failure up to :data:`MAX_DELAY` (1, 2, 4, ..., 32, 60, 60 s): about 60
    guesses an hour per name and per address. An attempt made sooner is refused without
    checking the password (the right one too) and is not counted, so waiting out the delay
    always works; names are counted whether they exist or not, so a refusal comes alike for
    a name that exists and one that does not. A name is counted by its first
    :data:`MAX_USER` + 1 characters (no longer name exists). A name or address with no
    attempt for :data:`FORGET_AFTER` seconds starts afresh; at most :data:`MAX_TRACKED` are
    remembered. ``clock`` is :func:`time.monotonic` (a test passes its own).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._attempts: OrderedDict[tuple[str, str], _Attempts] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def delay(failures: int) -> float:
        """Seconds an attempt must wait after the latest one, after ``failures`` failures."""
        if failures < FREE_FAILURES:
            return 0.0
        return min(FIRST_DELAY * 2.0 ** min(failures - FREE_FAILURES, 64), MAX_DELAY)

    def _record(self, key: tuple[str, str], now: float) -> _Attempts:
        record = self._attempts.get(key)
        if record is None or now - record.last > FORGET_AFTER:
            record = _Attempts()
        self._attempts[key] = record
        self._attempts.move_to_end(key)
        while len(self._attempts) > MAX_TRACKED:
            self._attempts.popitem(last=False)
        return record

    @staticmethod
    def _keys(user: str, address: str | None) -> list[tuple[str, str]]:
        return [("user", str(user)[: MAX_USER + 1].casefold()),
                ("address", address or "unknown")]

    def attempt(self, user: str, address: str | None) -> float:
        """0.0 when ``user`` from ``address`` may try now (the attempt is then counted as a
        failure until :meth:`succeeded`), else the seconds left to wait."""
        now = self.clock()
        with self._lock:
            records = [self._record(key, now) for key in self._keys(user, address)]
            wait = max(record.last + self.delay(record.failures) - now for record in records)
            if wait > 0:
                if not all(record.said for record in records):
                    log.warning("login of %r from %s refused for %.0f s more: %d failures of "
                                "the name, %d from the address", str(user)[:MAX_USER],
                                address or "unknown",
                                wait, records[0].failures, records[1].failures)
                    for record in records:
                        record.said = True
                return wait
            for record in records:
                record.failures += 1
                record.last = now
                record.said = False
            return 0.0

    def succeeded(self, user: str, address: str | None) -> None:
        """The attempt counted by :meth:`attempt` was right: clear the name's failures and
        take the attempt back from the address's."""
        name, place = self._keys(user, address)
        with self._lock:
            self._attempts.pop(name, None)
            record = self._attempts.get(place)
            if record is not None and record.failures:
                record.failures -= 1


class Logins:
    """User name -> how to check its password. ``logins(user, password)`` checks one
    password; Gradio's ``auth=`` gets :meth:`login`, throttled and off the event loop."""

    def __init__(self, throttle: LoginThrottle | None = None):
        self._plain: dict[str, str] = {}
        self._hashed: dict[str, str] = {}
        self.throttle = throttle or LoginThrottle()
        self.refusal_delay = REFUSAL_DELAY
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

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

    def _workers(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(LOGIN_WORKERS, thread_name_prefix="rudder-login",
                                                initializer=_lower_priority)
            return self._pool

    async def login(self, user: str, password: str) -> bool:
        """What Gradio's ``auth=`` calls: while :attr:`throttle` makes the name or the client
        address (:data:`CLIENT_ADDRESS`) wait, refused after :attr:`refusal_delay` seconds
        without checking the password; else the password checked on the login threads while
        the event loop serves other requests."""
        address = CLIENT_ADDRESS.get()
        if self.throttle.attempt(user, address) > 0:
            await asyncio.sleep(self.refusal_delay)
            return False
        loop = asyncio.get_running_loop()
        right = await loop.run_in_executor(self._workers(), self, user, password)
        if right:
            self.throttle.succeeded(user, address)
        return right


def _lower_priority() -> None:
    """Lower the calling thread's CPU priority by :data:`LOGIN_NICENESS` (Linux: a thread's
    own nice value; elsewhere nothing)."""
    try:
        thread = threading.get_native_id()
        current = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, current + LOGIN_NICENESS))
    except (AttributeError, OSError):
        pass


class ClientAddress:
    """ASGI middleware that sets :data:`CLIENT_ADDRESS` to each HTTP request's client host
    (behind a proxy on this machine, the address it forwards: uvicorn's proxy headers)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        token = CLIENT_ADDRESS.set(str(client[0]) if client else None)
        try:
            await self.app(scope, receive, send)
        finally:
            CLIENT_ADDRESS.reset(token)


def gradio_auth(auth):
    """``(auth=, app_kwargs=)`` for ``gr.Blocks.launch``: :class:`Logins` as its throttled
    coroutine with the middleware that tells it the client address; anything else as is."""
    if not isinstance(auth, Logins):
        return auth, {}
    from starlette.middleware import Middleware

    return auth.login, {"middleware": [Middleware(ClientAddress)]}


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
