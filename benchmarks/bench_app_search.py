"""Target: the app's search adds nothing beyond Gradio's own floor.

Starts ``python -m app --runs RUNS`` (the newest run trained on the dataset; the first start
trains a quick one when RUNS has none) and a do-nothing Gradio app whose ``/search`` takes
the same six inputs and returns a results table of the same size (copied from the app's
first answer), under the same queue settings; then, in one run, times through
gradio_client:

- the in-process search: :meth:`app.search_tab.SearchTab.search` (what the endpoint runs)
  on the same run, in this process;
- the app's ``/search`` and the do-nothing ``/search``, one client, interleaved round by
  round with the in-process search, so that a change of the machine's load hits all three;
- 8 clients at once (threads, each with its own gradio_client), on each app.

The queries are the sample's example candidates (frequent short captions per language),
searched once before timing (as in a running app, their videos' caption embeddings are
then cached on both sides), after the app's start-up work in the background (the annotation
queues) is done, which the output says. Targets: one-client p50 of the app <= the do-nothing
p50 + 1.5x the in-process search's p50; p95 at 8 clients <= 1 s. Prints the machine, load and thread
settings; exits 1 on a miss.

Usage: python benchmarks/bench_app_search.py [--runs runs] [--rounds 5] [--per-round 10]
       [--clients 8] [--per-client 10]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the repository's app and rudder, as in the app's own process (python -m app from ROOT)
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]
from machine import machine_line

WEB_FACTOR, CONCURRENT_P95_S = 1.5, 1.0  # the targets
INPUTS = ("auto", "en", 10, False, "en")  # query language, display language, k, translate, target


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_floor(port: int, table_file: Path) -> None:
    """The do-nothing app: ``/search`` with the search tab's six inputs returns a fixed table
    (the app's own first answer), with the app's queue settings and its search events'
    concurrency group."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    import gradio as gr
    import pandas as pd

    from app.search_tab import SEARCH_QUEUE
    from app.ui import QUEUE_SETTINGS

    table = json.loads(table_file.read_text())
    frame = pd.DataFrame(table["data"], columns=table["headers"])

    def nothing(query, lang, display, k, translate, target):
        return frame

    with gr.Blocks(analytics_enabled=False) as demo:
        query = gr.Textbox()
        lang = gr.Dropdown(["auto", "en"], value="auto")
        display = gr.Dropdown(["en"], value="en")
        k = gr.Slider(1, 50, value=10, step=1)
        translate = gr.Checkbox()
        target = gr.Dropdown(["en"], value="en")
        out = gr.Dataframe(headers=list(frame.columns), interactive=False)
        gr.Button().click(nothing, [query, lang, display, k, translate, target], [out],
                          api_name="search", **SEARCH_QUEUE)
    demo.queue(**QUEUE_SETTINGS)
    demo.launch(server_port=port, ssr_mode=False, quiet=True, show_error=True)


def wait_for_page(url: str, server: subprocess.Popen, timeout: float) -> None:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if server.poll() is not None:
            raise SystemExit(f"the server for {url} exited with {server.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{url} was not served within {timeout} s")


def first_results(client, query: str, timeout: float) -> dict:
    """The app's table for ``query``, polling while a first model trains."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        table = client.predict(query, *INPUTS, api_name="/search")[1]
        if table["data"]:
            return table
        time.sleep(1.0)
    raise SystemExit(f"no search results within {timeout} s")


def in_process_search(runs: Path, dataset: str, collection):
    """``SearchTab.search`` over the run the app serves (the same choice of run)."""
    from app.__main__ import engine_for, newest_run_for
    from app.search_tab import SearchTab
    from rudder.evaluation.loading import load_run

    checkpoint = newest_run_for(runs, dataset, collection.folder.meta.languages)
    run = load_run(checkpoint, dataset=dataset)
    return SearchTab(engine_for(run, collection), collection=collection)


def cpu_seconds(pid: int) -> float | None:
    """The CPU time (user + system) process ``pid`` has used, from /proc; None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until_idle(pid: int, timeout: float, share: float = 0.1, window: float = 2.0) -> str:
    """Wait until process ``pid`` uses under ``share`` of a core over ``window`` seconds
    (the app's start-up work, building the annotation queues in the background, is done);
    -> what was waited, to print."""
    start = time.monotonic()
    used = cpu_seconds(pid)
    if used is None:
        return "start-up work: not watched (no /proc)"
    while time.monotonic() - start < timeout:
        time.sleep(window)
        now = cpu_seconds(pid)
        if now is None or now - used < share * window:
            return (f"start-up work (the annotation queues) done: waited "
                    f"{time.monotonic() - start:.0f} s for the app to go idle")
        used = now
    return f"start-up work still running after {timeout:.0f} s: timed anyway"


def queries_of(collection, count: int) -> list[str]:
    """Frequent short captions, language by language in turn (the app's example candidates)."""
    from app.search_tab import example_candidates

    ranked = list(example_candidates(collection).values())
    mixed = [texts[i] for i in range(max(map(len, ranked))) for texts in ranked if i < len(texts)]
    return mixed[:count]


def percentile(values, q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def time_calls(call, queries, per: int, offset: int = 0) -> list[float]:
    """Seconds of ``per`` calls of ``call(query)``, cycling through ``queries``."""
    out = []
    for i in range(per):
        start = time.perf_counter()
        call(queries[(offset + i) % len(queries)])
        out.append(time.perf_counter() - start)
    return out


def concurrent(url: str, queries, clients: int, per_client: int) -> list[float]:
    """Seconds of every call of ``clients`` gradio clients searching at once."""
    from gradio_client import Client

    handles = [Client(url, verbose=False, analytics_enabled=False) for _ in range(clients)]
    times: list[list[float]] = [[] for _ in handles]
    barrier = threading.Barrier(len(handles))

    def work(i):
        call = lambda q: handles[i].predict(q, *INPUTS, api_name="/search")
        barrier.wait()
        times[i] = time_calls(call, queries, per_client, offset=3 * i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(handles))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [t for part in times for t in part]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    parser.add_argument("--dataset", default="sample")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved one-client rounds")
    parser.add_argument("--per-round", type=int, default=10, help="calls per side and round")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--per-client", type=int, default=10)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--serve-floor", nargs=2, metavar=("PORT", "TABLE_JSON"),
                        help=argparse.SUPPRESS)  # the do-nothing app's own process
    args = parser.parse_args(argv)
    if args.serve_floor:
        serve_floor(int(args.serve_floor[0]), Path(args.serve_floor[1]))
        return 0
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from gradio_client import Client

    from app.collection import Collection
    from rudder.data.lookup import resolve_dataset

    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    servers = []
    with tempfile.TemporaryDirectory(prefix="rudder-bench-app-") as tmp:
        try:
            app_port, floor_port = free_port(), free_port()
            app_url, floor_url = (f"http://127.0.0.1:{p}/" for p in (app_port, floor_port))
            servers.append(subprocess.Popen(
                [sys.executable, "-m", "app", "--runs", str(args.runs), "--db",
                 str(Path(tmp) / "labels.sqlite"), "--port", str(app_port), "--dataset",
                 args.dataset], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL))
            wait_for_page(app_url, servers[0], args.timeout)
            app = Client(app_url, verbose=False, analytics_enabled=False)
            collection = Collection(resolve_dataset(args.dataset))
            queries = queries_of(collection, args.queries)
            table = first_results(app, queries[0], args.timeout)  # a first model may train
            idle = wait_until_idle(servers[0].pid, args.timeout)
            tab = in_process_search(args.runs, args.dataset, collection)
            table_file = Path(tmp) / "table.json"
            table_file.write_text(json.dumps(table))
            servers.append(subprocess.Popen(
                [sys.executable, __file__, "--serve-floor", str(floor_port), str(table_file)],
                env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_for_page(floor_url, servers[1], args.timeout)
            floor = Client(floor_url, verbose=False, analytics_enabled=False)
            sides = {
                "in-process search": lambda q: tab.search(q, *INPUTS),
                "app /search": lambda q: app.predict(q, *INPUTS, api_name="/search"),
                "do-nothing /search": lambda q: floor.predict(q, *INPUTS, api_name="/search"),
            }
            for call in sides.values():  # warm-up: every query once
                time_calls(call, queries, len(queries))
            print(machine_line())
            print(idle)
            print(f"{len(table['data'])} results x {len(table['headers'])} columns per answer; "
                  f"{len(queries)} queries; app and do-nothing servers in their own processes")
            times: dict[str, list[float]] = {name: [] for name in sides}
            for r in range(args.rounds):
                for name, call in sides.items():
                    times[name] += time_calls(call, queries, args.per_round, r * args.per_round)
            p50 = {name: statistics.median(t) * 1000 for name, t in times.items()}
            for name, t in times.items():
                print(f"one client, {name}: p50 {p50[name]:.1f} ms, p95 "
                      f"{percentile(t, 0.95) * 1000:.1f} ms ({len(t)} calls)")
            allowed = p50["do-nothing /search"] + WEB_FACTOR * p50["in-process search"]
            one_ok = p50["app /search"] <= allowed
            print(f"one client: app p50 {p50['app /search']:.1f} ms vs do-nothing p50 + "
                  f"{WEB_FACTOR}x in-process = {allowed:.1f} ms -> "
                  f"{'OK' if one_ok else 'MISSED'}")
            p95 = {}
            for name, url in (("app /search", app_url), ("do-nothing /search", floor_url)):
                t = concurrent(url, queries, args.clients, args.per_client)
                p95[name] = percentile(t, 0.95)
                print(f"{args.clients} clients at once, {name}: p50 "
                      f"{statistics.median(t) * 1000:.1f} ms, p95 {p95[name] * 1000:.1f} ms "
                      f"({len(t)} calls, load {os.getloadavg()[0]:.2f})")
            many_ok = p95["app /search"] <= CONCURRENT_P95_S
            print(f"{args.clients} clients: app p95 {p95['app /search']:.2f} s (target <= "
                  f"{CONCURRENT_P95_S:g} s) -> {'OK' if many_ok else 'MISSED'}")
            print(machine_line())
        finally:
            for server in servers:
                server.terminate()
                server.wait(timeout=30)
    return 0 if one_ok and many_ok else 1


if __name__ == "__main__":
    sys.exit(main())
