"""The smoke runs of the benchmarks that start no server (codecs, checksums, record batches):
a few seconds each, in one file so that one worker runs them in turn."""

from __future__ import annotations

import pytest

from .quick import run_quick

#: bench module -> a regular expression (multi-line) that one of its ratio lines matches.
RATIO_LINES = {
    "bench_crc": r"^64 KiB\s+[\d.]+\s+[\d.]+\s+\d+\.\dx",
    "bench_records": r"^200 B\s+zstd\s+parse\s+.*\d+\.\d\dx",
    "bench_validation": r"^1024 B x 64\s+zstd\s+.*\d+\.\dx$",
}


@pytest.mark.parametrize("bench", sorted(RATIO_LINES))
def test_quick_run(bench: str) -> None:
    run_quick(bench, RATIO_LINES[bench])
