"""bench_client's smoke run: one broker, our client against kafka-python, aiokafka and
confluent-kafka on one produce and one consume shape (both codecs between them)."""

from __future__ import annotations

from .quick import run_quick


def test_quick_run() -> None:
    out = run_quick(
        "bench_client",
        r"^ratio produce-200B: vs kafka-python \d+\.\d+x .*vs aiokafka \d+\.\d+x .*vs confluent-kafka \d+\.\d+x",
        "--shapes",
        "produce-200B,consume-1KiB-zstd",
    )
    assert "ratio consume-1KiB-zstd: vs kafka-python" in out
