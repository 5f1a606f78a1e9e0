"""bench/bench_mirror.py and bench/bench_mirror_link.py run (--quick, JSON): every copier copied
every topic whole (the benches check the copies end where the sources do), every figure present
and sane, and the tables render from the JSON as --from-json prints them. No timing is asserted:
the figures are the benchmarks' to report, on a machine the test does not control.

Both run with ``--long`` only (tests/bench/quick.py, LONG_ONLY): two clusters, six copies and
latency runs take 100-200 s of a CI worker, however little they copy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from .quick import skip_unless_long

ROOT = Path(__file__).resolve().parents[2]


def run_bench(module: str, *args: str, timeout: float = 600) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", module, "--quick", "--json", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def rendered(module: str, document: dict[str, Any], tmp_path: Path) -> str:
    saved = tmp_path / "bench.json"
    saved.write_text(json.dumps(document))
    return subprocess.run(
        [sys.executable, "-m", module, "--from-json", str(saved)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip


def test_the_mirror_cost_benchmark_runs_quick(tmp_path: Path, long_run: bool) -> None:
    skip_unless_long("bench_mirror", long_run)
    document = run_bench("bench.bench_mirror")
    topics = {source["topic"] for source in document["sources"]}
    assert topics == {"events-64k", "events-1024k"}
    copies = document["copies"]
    assert {(c["who"], c["topic"]) for c in copies} == {
        (who, topic) for who in ("shallow", "confluent", "recompress") for topic in topics
    }
    for copy in copies:
        assert copy["seconds"] > 0 and copy["cpu"] > 0, copy
        assert copy["source_bytes"] > 0 and copy["records"] > 0, copy
    assert document["latency"]["aggregate"]["records"] > 0
    table = rendered("bench.bench_mirror", document, tmp_path)
    assert "CPU-s/GB" in table and "confluent / shallow CPU per GB" in table


def test_the_long_link_benchmark_runs_quick(tmp_path: Path, long_run: bool) -> None:
    skip_unless_long("bench_mirror_link", long_run)
    document = run_bench("bench.bench_mirror_link")
    assert {s["partitions"] for s in document["sources"]} == {1, 16}
    copies = document["copies"]
    assert {c["who"] for c in copies} == {"shallow", "one fetch", "confluent"}
    for copy in copies:
        assert copy["seconds"] > 0 and copy["cpu"] > 0, copy
        # What crossed the far link towards the copier is at least what it copied.
        assert copy["link_bytes"] >= 0.9 * copy["source_bytes"], copy
    for who, figures in document["latency"].items():
        assert figures["records"] > 0 and 0 < figures["p50_ms"] <= figures["p99_ms"] <= figures["max_ms"], who
    table = rendered("bench.bench_mirror_link", document, tmp_path)
    assert "sustained" in table and "p99 ms" in table
