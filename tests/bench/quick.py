"""Running a benchmark's ``--quick`` smoke run, as the suite does (tests/bench/test_*.py).

Each smoke run is a process of its own, as a user runs it (``python -m bench.<name> --quick``),
with the worker's port range (``TRIBUTARY_TEST_PORTS``) inherited. It must exit 0 and print
its ratio line (its figures against the peer measured in the same run). Nothing is asserted
about the figures themselves: the machine is shared and a smoke run is tiny; docs/benchmarks.md
holds the full runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Seconds one smoke run may take on a loaded 2-core machine before the test gives up on it.
TIMEOUT = 600
#: The benchmarks whose smoke run is too long for CI, and why; they run with ``--long``.
LONG_ONLY = {
    "bench_groups": "consumer processes of three group protocols, each group settling twice "
    "(librdkafka's classic members wait out their rebalances): about 40 s however small",
    "bench_loader": "starts Spark (a session alone takes 5-15 s on 2 cores) and loads twice: 30-60 s",
    "bench_replication": "two clusters of three brokers, each topic's replicas in sync before every job: 30-60 s",
    "bench_mirror": "two clusters, a copy by each copier and a latency run: about a minute",
    "bench_mirror_link": "two clusters, the fault proxy's far link, three copiers on 1 and 16 partitions: "
    "about a minute",
}


def skip_unless_long(bench: str, long_run: bool) -> None:
    """Skip ``bench``'s smoke run unless ``--long`` was given (LONG_ONLY says why)."""
    if not long_run:
        pytest.skip(f"{bench} --quick runs with --long only: {LONG_ONLY[bench]}")


def run_quick(bench: str, ratio_line: str, *extra: str) -> str:
    """Run ``python -m bench.<bench> --quick [extra]`` from the repository root; assert that it
    exits 0 and prints a line matching ``ratio_line`` (multi-line regex); its output."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", f"bench.{bench}", "--quick", *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        check=False,
    )
    took = time.monotonic() - started
    where = f"bench.{bench} --quick {' '.join(extra)} (exit {result.returncode}, {took:.0f} s)"
    assert result.returncode == 0, f"{where}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-5000:]}"
    assert re.search(ratio_line, result.stdout, re.MULTILINE), (
        f"{where} printed no line matching {ratio_line!r}:\n{result.stdout[-5000:]}"
    )
    return result.stdout
