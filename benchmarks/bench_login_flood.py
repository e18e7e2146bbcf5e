"""Target: while 4 clients flood ``/login`` with wrong passwords, another logged-in user's
search answers within 150 ms of its quiet median.

Starts ``python -m app --auth-file FILE --runs RUNS`` in a fresh process (real scrypt cost,
N=2^14), logs a reader in through gradio_client and times its ``/search`` calls: first with
no other traffic, then while ``--clients`` threads post wrong passwords to ``/login`` as
fast as the server answers, in two ways (``--rounds`` rounds of the three phases, interleaved
so that a change in the machine's load falls on all of them):

- ``one address``: every guess comes from 127.0.0.1 (random user names): after 5 failures
  the address must wait, so most guesses are refused without hashing;
- ``many addresses``: each guess carries a random ``X-Forwarded-For`` address and user name
  (uvicorn trusts the header from 127.0.0.1, as from a reverse proxy on the machine), so no
  throttle applies and every guess costs one scrypt: what is left is hashing off the event
  loop, on its 2 threads.

Prints the machine (CPU model, cores, load average before and after, thread settings), the
reader's median and 90th-percentile search latency per phase and the guesses answered per
second. Exits 1 when a flooded median misses the target.

Usage: python benchmarks/bench_login_flood.py --runs RUNS [--dataset sample] [--searches 15]
[--rounds 3]
(RUNS without a run: the app trains a quick model first, which takes minutes.)
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from machine import machine_line  # benchmarks/machine.py, beside this script

TARGET_EXTRA_SECONDS = 0.150


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_page(url: str, server: subprocess.Popen, timeout: float) -> None:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if server.poll() is not None:
            raise SystemExit(f"python -m app exited with {server.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except urllib.error.HTTPError:
            return  # served (a login page or 401)
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"the app did not start within {timeout} s")


def search(client):
    return client.predict("Cut the pipe", "auto", "en", 5, False, "en", api_name="/search")


def search_ready(client) -> bool:
    return bool(search(client)[1]["data"])


def timed_searches(client, count: int) -> list[float]:
    latencies = []
    for _ in range(count):
        start = time.perf_counter()
        _, table, *_ = search(client)
        latencies.append(time.perf_counter() - start)
        if not table["data"]:
            raise SystemExit("the search returned no videos")
    return latencies


def flood(url: str, stop: threading.Event, many_addresses: bool, counter: list) -> None:
    import httpx

    rng = random.Random()
    with httpx.Client(timeout=60) as client:
        while not stop.is_set():
            headers = {}
            if many_addresses:
                headers["X-Forwarded-For"] = f"10.{rng.randrange(256)}.{rng.randrange(256)}." \
                    f"{rng.randrange(1, 255)}"
            client.post(url + "login", headers=headers,
                        data={"username": f"guess{rng.randrange(10**9)}", "password": "wrong"})
            counter.append(1)


def summary(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    return statistics.median(ordered), ordered[int(0.9 * (len(ordered) - 1))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--dataset", default="sample")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--searches", type=int, default=15, help="searches per phase and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    from gradio_client import Client

    from app.auth import hash_password

    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    results: dict[str, tuple[list[float], list[float]]] = {
        phase: ([], []) for phase in ("quiet", "one address", "many addresses")}
    password = "reader-secret"
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="rudder-bench-login-") as tmp:
        users = Path(tmp) / "users.txt"
        users.write_text(f"reader:{hash_password(password)}\n", encoding="utf-8")
        command = [sys.executable, "-m", "app", "--runs", str(args.runs), "--dataset",
                   args.dataset, "--db", str(Path(tmp) / "labels.sqlite"), "--port", str(port),
                   "--auth-file", str(users), "--quick-epochs", "1"]
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            wait_for_page(url, server, args.timeout)
            reader = Client(url, verbose=False, analytics_enabled=False,
                            auth=("reader", password))
            ready_by = time.perf_counter() + args.timeout
            while not search_ready(reader):  # a first start trains a quick model meanwhile
                if time.perf_counter() > ready_by:
                    raise SystemExit(f"no search results within {args.timeout} s")
                time.sleep(1.0)
            timed_searches(reader, 3)  # the index and the query path warm
            for _ in range(args.rounds):  # interleaved, so the machine's load drifts evenly
                results["quiet"][0].extend(timed_searches(reader, args.searches))
                for phase, many in (("one address", False), ("many addresses", True)):
                    stop, counter = threading.Event(), []
                    threads = [threading.Thread(target=flood, args=(url, stop, many, counter))
                               for _ in range(args.clients)]
                    for thread in threads:
                        thread.start()
                    time.sleep(1.0)  # the flood under way
                    start, before = time.perf_counter(), len(counter)
                    results[phase][0].extend(timed_searches(reader, args.searches))
                    results[phase][1].append((len(counter) - before)
                                             / (time.perf_counter() - start))
                    stop.set()
                    for thread in threads:
                        thread.join()
        finally:
            server.terminate()
            server.wait(timeout=30)
    quiet = summary(results["quiet"][0])[0]
    missed = False
    for phase, (latencies, rates) in results.items():
        median, p90 = summary(latencies)
        rate = statistics.mean(rates) if rates else 0.0
        flooded = phase != "quiet"
        miss = flooded and median > quiet + TARGET_EXTRA_SECONDS
        missed |= miss
        print(f"{phase:>15}: search median {1000 * median:.0f} ms, p90 {1000 * p90:.0f} ms "
              f"over {len(latencies)} searches"
              + (f"; {rate:.1f} guesses answered per second by {args.clients} clients"
                 if flooded else "") + (" (MISSED)" if miss else ""))
    print(f"target: flooded median within {1000 * TARGET_EXTRA_SECONDS:.0f} ms of the quiet "
          f"one; load average after {os.getloadavg()[0]:.1f}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
