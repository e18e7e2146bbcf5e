"""One line that says where a benchmark ran: CPU model, cores, load, thread settings.

Figures taken on a shared machine are only comparable with their load beside them; the
benchmarks print :func:`machine_line` before their figures.
"""

from __future__ import annotations

import os
import platform
import sys

from rudder.runs.folders import cpu_model


def threads_text() -> str:
    """``OMP_NUM_THREADS`` and, when torch is imported, its intra-op thread count."""
    parts = [f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}"]
    if "torch" in sys.modules:
        parts.append(f"torch threads {sys.modules['torch'].get_num_threads()}")
    return ", ".join(parts)


def machine_line() -> str:
    """``machine: CPU, cores, AVX-512 or not, load average (1/5/15 min), threads, numpy``."""
    import numpy as np

    features = getattr(np._core._multiarray_umath, "__cpu_features__", {})  # numpy's own probe
    simd = "AVX-512" if features.get("AVX512F") else "AVX2" if features.get("AVX2") else "no AVX2"
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"machine: {cpu_model()}, {os.cpu_count()} cores ({simd}), load {load}, "
            f"{threads_text()}, numpy {np.__version__}, python {platform.python_version()}")
