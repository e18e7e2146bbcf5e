"""Target: ``python -m rudder.train --help`` answers in under 1.5 s.

Runs it ``--repeat`` times in fresh processes and prints the median wall time; exits 1 when
the target is missed. (Importing torch alone takes about 1 s on this machine, so the
command lines import it only when a run is loaded: tests/test_startup.py keeps it so.)

Usage: python benchmarks/bench_startup.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

TARGET_SECONDS = 1.5


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rudder.train", "--help"], check=True,
                       capture_output=True)
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print(f"python -m rudder.train --help: median {median:.2f} s over {args.repeat} runs "
          f"(target < {TARGET_SECONDS} s)")
    return 0 if median < TARGET_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
