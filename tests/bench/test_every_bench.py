"""Every benchmark in bench/ has a smoke run that a test executes (``--quick``), so that none
can rot: here in tests/bench/, or in the test file of the area it measures (ELSEWHERE)."""

from __future__ import annotations

import re
from pathlib import Path

from .quick import LONG_ONLY, ROOT

#: Benchmarks whose smoke run lives with the tests of their area.
ELSEWHERE = {
    "bench_cleaner": "tests/broker/log/cleaner/test_bench.py",
    "bench_recompression": "tests/broker/log/test_compression_type.py",
    "bench_tls": "tests/test_bench_tls.py",
}


def benchmarks() -> set[str]:
    """The modules of bench/ that are benchmarks: bench_*.py with a ``--quick`` mode (helpers
    such as common.py, or a bench_* module of shared copiers, have none)."""
    return {path.stem for path in (ROOT / "bench").glob("bench_*.py") if "--quick" in path.read_text()}


def runs(text: str, bench: str) -> bool:
    """Whether a test file's text runs ``bench`` (by module name, as ``bench.<name>`` or quoted)."""
    return re.search(rf"bench\.{bench}\b|[\"']{bench}[\"']|import {bench}\b", text) is not None


def test_every_benchmark_has_a_smoke_run() -> None:
    here = [p.read_text() for p in (ROOT / "tests" / "bench").glob("test_*.py") if p.name != Path(__file__).name]
    elsewhere = {bench: (ROOT / path).read_text() for bench, path in ELSEWHERE.items() if (ROOT / path).exists()}
    missing = sorted(
        bench
        for bench in benchmarks()
        if not any(runs(text, bench) for text in here) and not runs(elsewhere.get(bench, ""), bench)
    )
    assert missing == [], "add a smoke run (python -m bench.<name> --quick) to tests/bench/ for these"


def test_the_tables_name_only_benchmarks() -> None:
    known = benchmarks()
    assert sorted(set(ELSEWHERE) - known) == []
    assert sorted(set(LONG_ONLY) - known) == []
