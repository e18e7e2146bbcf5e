"""Failed logins are throttled per user name and per client address (a fake clock, no sleeps),
and passwords are verified off the event loop."""

import asyncio
import threading
import time

import pytest

from app import auth
from app.auth import CLIENT_ADDRESS, Logins, LoginThrottle, hash_password

CHITRA = hash_password("c-pass", n=2**4, r=1, p=1)  # cheap scrypt parameters


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def scrypts(monkeypatch):
    """Every scrypt run, made cheap (whatever cost the hash asks for)."""
    calls = []
    real = auth._scrypt

    def counting(password, salt, n, r, p):
        calls.append(n)
        return real(password, salt, 16, 1, 1)

    monkeypatch.setattr(auth, "_scrypt", counting)
    return calls


def logins_with(clock, tmp_path):
    path = tmp_path / "users.txt"
    path.write_text(f"chitra:{CHITRA}\n", encoding="utf-8")
    logins = Logins(LoginThrottle(clock))
    logins.refusal_delay = 0.0
    logins.add_plain("asha:a-pass")
    logins.add_file(path)
    return logins


def login(logins, user, password, address="10.0.0.1"):
    """One login as Gradio makes it, from ``address``."""
    async def attempt():
        token = CLIENT_ADDRESS.set(address)
        try:
            return await logins.login(user, password)
        finally:
            CLIENT_ADDRESS.reset(token)
    return asyncio.run(attempt())


def test_the_delays_grow_after_five_failures_and_are_capped():
    delays = [LoginThrottle.delay(f) for f in range(14)]
    assert delays == [0, 0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 60, 60, 60]
    assert LoginThrottle.delay(10**6) == auth.MAX_DELAY


def test_guesses_slow_down_and_the_right_password_waits_out_the_delay(clock, tmp_path, scrypts):
    logins = logins_with(clock, tmp_path)
    for _ in range(5):
        assert not login(logins, "chitra", "guess")
    assert len(scrypts) == 5
    # the 6th attempt within the second is refused at once, even with the right password
    assert not login(logins, "chitra", "c-pass") and len(scrypts) == 5
    clock.now += 1.0
    assert not login(logins, "chitra", "guess6") and len(scrypts) == 6  # checked: 6 failures
    clock.now += 1.9
    assert not login(logins, "chitra", "c-pass") and len(scrypts) == 6  # 2 s not yet over
    clock.now += 0.1
    assert login(logins, "chitra", "c-pass") and len(scrypts) == 7
    # a success clears the name's failures (the address keeps its own): from elsewhere the
    # next wrong guess is checked at once
    assert not login(logins, "chitra", "guess", address="10.0.0.2") and len(scrypts) == 8
    assert not login(logins, "chitra", "c-pass")  # the address still waits its 2 s


def test_eighty_failures_leave_at_most_one_try_a_minute(clock, tmp_path, scrypts):
    logins = logins_with(clock, tmp_path)
    for tried in range(80):  # one guess a second for 80 s
        login(logins, "asha", f"guess{tried}")
        clock.now += 1.0
    assert len(scrypts) <= 5 + 6  # 5 free, then after 1+2+4+8+16+32 s
    assert not login(logins, "asha", "a-pass")  # right straight after: still refused
    clock.now += auth.MAX_DELAY
    assert login(logins, "asha", "a-pass")


def test_the_address_is_throttled_across_user_names(clock, tmp_path, scrypts):
    logins = logins_with(clock, tmp_path)
    for i in range(5):
        assert not login(logins, f"user{i}", "guess", address="10.0.0.9")
    assert not login(logins, "asha", "a-pass", address="10.0.0.9")  # this address must wait
    assert login(logins, "asha", "a-pass", address="10.0.0.2")  # another one need not
    assert len(scrypts) == 6


def test_the_name_is_throttled_across_addresses_and_case(clock, tmp_path, scrypts):
    logins = logins_with(clock, tmp_path)
    for i in range(5):
        assert not login(logins, "Asha" if i % 2 else "asha", "guess", address=f"10.1.0.{i}")
    assert not login(logins, "asha", "a-pass", address="10.1.0.99")
    assert len(scrypts) == 5


def test_known_and_unknown_names_are_throttled_alike(clock, tmp_path, scrypts, monkeypatch):
    """The same count, the same refusals, no scrypt while refused, one scrypt otherwise, the
    same wait before a refusal: whether a name exists does not show in what a login costs."""
    logins = logins_with(clock, tmp_path)
    logins.refusal_delay = auth.REFUSAL_DELAY
    waits = []
    real_sleep, this_thread = asyncio.sleep, threading.current_thread()

    async def sleep(seconds):
        # only this test's logins: event loops of other threads (servers of earlier tests in
        # the same process) keep sleeping for real
        if threading.current_thread() is this_thread:
            waits.append(seconds)
        else:
            await real_sleep(seconds)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    for i, name in enumerate(("chitra", "nobody")):
        before = len(scrypts)
        outcomes = [login(logins, name, "guess", address=f"10.2.0.{i}") for _ in range(8)]
        assert outcomes == [False] * 8
        assert len(scrypts) - before == 5  # five checked, three refused without hashing
    assert waits == [auth.REFUSAL_DELAY] * 6


def test_counts_are_forgotten_after_an_hour_and_bounded(clock, tmp_path, scrypts, monkeypatch):
    logins = logins_with(clock, tmp_path)
    for _ in range(6):
        login(logins, "asha", "guess")
    assert not login(logins, "asha", "a-pass")
    clock.now += auth.FORGET_AFTER + 1
    assert login(logins, "asha", "a-pass")
    monkeypatch.setattr(auth, "MAX_TRACKED", 4)
    for i in range(10):
        login(logins, f"u{i}", "guess", address=f"10.3.0.{i}")
    assert len(logins.throttle._attempts) == 4
    login(logins, "x" * 10**6, "guess")  # a name is remembered by its first 101 characters
    assert max(len(name) for _, name in logins.throttle._attempts) == auth.MAX_USER + 1


def test_attempts_in_flight_count_before_their_check_ends(clock, tmp_path, monkeypatch):
    """Twenty simultaneous guesses: only the first five are checked."""
    logins = logins_with(clock, tmp_path)
    checked = []
    monkeypatch.setattr(Logins, "__call__", lambda self, u, p: checked.append(p) or False)

    async def flood():
        token = CLIENT_ADDRESS.set("10.4.0.1")
        try:
            return await asyncio.gather(*(logins.login("asha", f"g{i}") for i in range(20)))
        finally:
            CLIENT_ADDRESS.reset(token)

    assert asyncio.run(flood()) == [False] * 20 and len(checked) == 5


def test_passwords_are_verified_off_the_event_loop(tmp_path, monkeypatch):
    """Four logins whose scrypt takes 0.5 s each: the event loop keeps ticking meanwhile."""
    logins = logins_with(time.monotonic, tmp_path)

    def slow(password, salt, n, r, p):
        time.sleep(0.5)
        return b"\0" * auth.HASH_BYTES

    monkeypatch.setattr(auth, "_scrypt", slow)

    async def main():
        gaps, last = [], time.perf_counter()

        async def ticker():
            nonlocal last
            while True:
                await asyncio.sleep(0.01)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        tick = asyncio.create_task(ticker())
        results = await asyncio.gather(*(
            logins.login(f"user{i}", "guess") for i in range(4)))
        tick.cancel()
        return results, max(gaps)

    results, worst = asyncio.run(main())
    assert results == [False] * 4
    assert worst < 0.4, f"the event loop stalled {worst:.2f} s"  # on it: 0.5 s or more


def test_the_login_threads_run_at_a_lower_priority(tmp_path):
    import os

    logins = logins_with(time.monotonic, tmp_path)
    pool = logins._workers()
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    theirs = pool.submit(lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
    assert theirs.result() == min(19, mine + auth.LOGIN_NICENESS)
    assert os.getpriority(os.PRIO_PROCESS, 0) == mine  # the server's own threads keep theirs


def test_gradio_gets_the_coroutine_and_the_address_middleware():
    logins = Logins()
    logins.add_plain("asha:a-pass")
    callable_auth, kwargs = auth.gradio_auth(logins)
    assert asyncio.iscoroutinefunction(callable_auth)
    assert [m.cls for m in kwargs["middleware"]] == [auth.ClientAddress]
    assert auth.gradio_auth(("asha", "x")) == (("asha", "x"), {})

    seen = []

    async def app(scope, receive, send):
        seen.append(CLIENT_ADDRESS.get())

    asyncio.run(auth.ClientAddress(app)({"type": "http", "client": ("10.5.0.7", 5555)},
                                        None, None))
    assert seen == ["10.5.0.7"] and CLIENT_ADDRESS.get() is None
