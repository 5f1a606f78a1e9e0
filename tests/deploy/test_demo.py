"""The README's main command (`tributary demo`) end to end on a small topology of free ports,
then `tributary status` on what it left: the last load with its counts, everything else down."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tributary.deploy.appliance.demo import MARKER, DemoError, Produced, Report, claim_directory, render
from tributary.deploy.appliance.warehouse import WarehouseCount
from tributary.deploy.audit.model import HOUR_MS, Verdict
from tributary.deploy.audit.model import Row as AuditRow

from .topologies import write_topology

EVENTS = 3000


def test_demo_end_to_end_counts_agree(tmp_path: Path) -> None:
    # East and west serve the mirrors on a SASL_SSL listener, as deploy/examples/local.toml does.
    path = write_topology(tmp_path / "t.toml", datacenters=("east", "west", "aggregate"), mirrors=True, secure=True)
    warehouse, run_dir = tmp_path / "wh", tmp_path / "demo-run"
    result = subprocess.run(
        [sys.executable, "-m", "tributary.deploy.cli", "demo", "--topology", str(path), "--events", str(EVENTS),
         "--warehouse", str(warehouse), "--run-dir", str(run_dir)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    # Progress through every phase, in order.
    phases = [int(m[1]) for m in re.finditer(r"^== (\d)/6 ", out, re.MULTILINE)]
    assert phases == [1, 2, 3, 4, 5, 6], out
    # Every stream agrees at every stage; the totals are what was produced.
    streams = re.findall(r"^(east|west) +(pageviews|searches|clicks) +([\d,]+) +([\d,]+) +([\d,]+) +([\d,]+) +ok$", out,
                         re.MULTILINE)  # fmt: skip
    assert len(streams) == 6, out
    for _, _, *counts in streams:
        assert len(set(counts)) == 1
    assert re.search(rf"^total +{2 * EVENTS:,} +{2 * EVENTS:,} +{2 * EVENTS:,} +{2 * EVENTS:,} +ok$", out, re.MULTILINE)
    assert "every count agrees: produced = source = aggregate = Hadoop" in out
    ratio = float(re.search(r"zstd batches, source disks .*\((\d+\.\d)x smaller\)", out)[1])  # type: ignore[index]
    assert ratio > 2.0, out  # repetitive JSON in batches compresses
    assert re.search(r"^  east +0 records, 0\.0 s behind at the end$", out, re.MULTILINE)
    assert re.search(r"peak memory of all processes together: [\d,]+ MiB", out)
    # The cross-datacenter links ran over SASL_SSL: the source brokers counted the mirrors' logins.
    for dc in ("east", "west"):
        line = re.search(rf"^  mirror {dc} \(source\) +{dc} EXTERNAL +SASL_SSL +cross-datacenter +(\d+) SCRAM-SHA-512 "
                         r"logins$", out, re.MULTILINE)  # fmt: skip
        assert line is not None and int(line[1]) > 0, out
        assert re.search(rf"^  mirror {dc} \(target\) +aggregate PLAINTEXT +PLAINTEXT +local *$", out, re.MULTILINE)
    assert re.search(r"^  load nightly +aggregate PLAINTEXT +PLAINTEXT +local *$", out, re.MULTILINE), out
    # The run directory's secrets are its owner's alone.
    security = run_dir / "security"
    assert security.stat().st_mode & 0o777 == 0o700
    for secret in [*security.glob("passwords/*"), *security.glob("tls/*-key*.pem"), *security.glob("tls/*keystore*")]:
        assert secret.stat().st_mode & 0o077 == 0, secret
    # The loader's report agrees with the files (checked by the demo) and is where status finds it.
    summary = json.loads((run_dir / "loads" / "nightly.json").read_text())
    assert summary["records"] == 2 * EVENTS
    assert (warehouse / MARKER).exists()

    status = subprocess.run(
        [sys.executable, "-m", "tributary.deploy.cli", "status", "--topology", str(path), "--run-dir", str(run_dir),
         "--timeout", "1"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert status.returncode == 3  # the demo stopped everything
    load_row = re.search(
        r"^load +nightly +\S+ +ok +last run .*: ([\d,]+) records, .* 0 gaps$", status.stdout, re.MULTILINE
    )
    assert load_row is not None, status.stdout
    assert load_row[1] == f"{2 * EVENTS:,}"


def _report(hadoop_rows: int, distinct: int | None = None) -> Report:
    report = Report({"east": "east"})
    report.produced["east"] = Produced(records=Counter(pageviews=10, searches=0, clicks=0))
    report.source_records = {("east", "pageviews"): 10}
    report.aggregate_records = {("east", "pageviews"): 10}
    count = WarehouseCount(rows=hadoop_rows)
    count.offsets = {(0, i) for i in range(hadoop_rows if distinct is None else distinct)}
    report.hadoop = {("east.pageviews", "east"): count}
    report.loader_records = {("east", "pageviews"): hadoop_rows}
    report.load_exit = 0
    return report


def test_agreeing_counts_pass_and_disagreeing_ones_fail() -> None:
    good = _report(10)
    good.check()
    assert good.problems == []
    short = _report(9)
    short.check()
    assert short.problems == [
        "east/pageviews: 10 acknowledged to the producer, 10 at the source, 10 in the aggregate, 9 in Hadoop, "
        "9 in the loader's report"
    ]
    assert "MISMATCH" in render(short) and "COUNTS DISAGREE" in render(short)
    duplicated = _report(10, distinct=8)
    duplicated.check()
    assert duplicated.problems == ["east/pageviews: 2 duplicate offsets in Hadoop"]


def test_an_hour_the_audit_does_not_find_ok_fails_the_demo() -> None:
    hour = 1_764_000_000_000 - 1_764_000_000_000 % HOUR_MS
    report = _report(10)
    report.audit = [AuditRow("east", "pageviews", hour, 10, 10, 10, 10, Verdict.OK, "")]
    report.audit_window = (hour, hour + 1)
    report.check()
    assert report.problems == []
    assert re.search(r"^2025-11-24 \d\d:00 +10 +10 +10 +10 +ok$", render(report), re.MULTILINE), render(report)
    late = _report(10)
    why = "the mirror has recorded 8 of 10"
    late.audit = [AuditRow("east", "pageviews", hour, 10, 8, 8, 8, Verdict.IN_FLIGHT, why)]
    late.check()
    assert late.problems == [
        f"audit east/pageviews {time.strftime('%Y-%m-%d %H:00', time.gmtime(hour / 1000))}: in flight "
        "(the mirror has recorded 8 of 10)"
    ]


def test_demo_refuses_directories_it_did_not_write(tmp_path: Path) -> None:
    (tmp_path / "wh").mkdir()
    (tmp_path / "wh" / "precious.parquet").write_bytes(b"x")
    with pytest.raises(DemoError, match="holds data the demo did not write"):
        claim_directory(tmp_path / "wh", "warehouse")
    assert (tmp_path / "wh" / "precious.parquet").exists()
    claim_directory(tmp_path / "fresh", "warehouse")
    (tmp_path / "fresh" / "old.parquet").write_bytes(b"x")
    claim_directory(tmp_path / "fresh", "warehouse")  # its own: wiped
    assert sorted(p.name for p in (tmp_path / "fresh").iterdir()) == [MARKER]
