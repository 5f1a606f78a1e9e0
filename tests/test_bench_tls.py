"""bench/bench_tls.py runs (--quick): one broker, both paths, every figure present and sane."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_tls_benchmark_runs_quick(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench.bench_tls", "--quick", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads(result.stdout)
    shapes = document["shapes"]
    assert set(shapes) == {"fetch", "produce", "connect", "send"}
    send = shapes.pop("send")
    assert all(send[kind] > 0 for kind in ("pooled", "naive", "sendfile")), send
    for name, shape in shapes.items():
        assert shape["plaintext"] > 0 and shape["secure"] > 0, (name, shape)
        assert 0 < shape["ratio"] < 10, (name, shape)
        assert shape["rounds"] == 2
    # The table renders from the JSON, as --from-json prints it.
    saved = tmp_path / "bench-tls.json"
    saved.write_text(result.stdout)
    table = subprocess.run(
        [sys.executable, "-m", "bench.bench_tls", "--from-json", str(saved)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert "fetch MB/s" in table and "set-ups/s" in table
