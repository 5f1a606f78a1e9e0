"""bench/bench_cleaner.py's in-process part runs (``--quick``): a log compacted and checked
against its model, with figures per core next to a plain decode."""

from __future__ import annotations

import json

import pytest

from bench import bench_cleaner


def test_the_cleaner_benchmark_runs_and_checks_its_model(capsys: pytest.CaptureFixture[str]) -> None:
    bench_cleaner.main(["--quick", "--parts", "throughput", "--json"])
    result = json.loads(capsys.readouterr().out)["throughput"]
    assert result["verified"] is True
    assert result["records"] == 50_000 and result["keys"] == 500
    assert result["records_per_s_per_core"] > 0 and result["clean_over_decode"] > 0
    assert result["rounds"][0]["records_kept"] < result["rounds"][0]["records_read"]
