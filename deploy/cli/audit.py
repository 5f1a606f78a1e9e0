"""``tributary audit``: every record counted per topic, source datacenter and hour at each stage.

    tributary audit --topology FILE [--run-dir DIR] [--from TIME] [--to TIME] [--output table|json]
                    [--timeout SECONDS] [--metrics-file PATH]

Counts the records of each hour in the source cluster, below the mirror's checkpoints, in the
aggregate cluster and in Hadoop (the loader's committed manifests), and gives each hour a
verdict: ok, in flight, not loaded yet, retention, or MISMATCH. TIME is ISO 8601
(``2026-11-24T10:00``, UTC unless it names an offset) or ``now``; the window defaults to the
last 24 hours and is widened to whole hours. Exit status: 0 when every difference is explained,
1 when one is not, 2 for a bad topology or a stage that cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import trio

from tributary.client.errors import KafkaError
from tributary.deploy.appliance.topology import TopologyError, load_topology
from tributary.deploy.audit.collect import AuditError, collect
from tributary.deploy.audit.metrics import metrics_text
from tributary.deploy.audit.model import HOUR_MS, audit, settled
from tributary.deploy.audit.report import render
from tributary.deploy.cli.up import add_topology_arguments
from tributary.loader.summary import write_atomically

PROG = "tributary audit"


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "audit",
        help="count every record per topic and hour at the source, the mirror, the aggregate and Hadoop",
        description="Compare, per topic, source datacenter and hour, the records in the source cluster, below "
        "the mirror's checkpoints, in the aggregate cluster and in Hadoop, and explain each difference. "
        "Exit status 0 when every difference is explained, 1 when one is not.",
    )
    add_topology_arguments(parser)
    parser.add_argument("--from", dest="start", metavar="TIME", help="start of the window (default: 24 h ago)")
    parser.add_argument("--to", dest="end", metavar="TIME", default="now", help="end of the window (default: now)")
    parser.add_argument("--output", choices=("table", "json"), default="table", help="output format")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS", help="per request (default 10)")
    parser.add_argument(
        "--metrics-file",
        metavar="PATH",
        type=Path,
        help="also write the counts and verdicts here as Prometheus metrics (node_exporter textfile format)",
    )
    parser.set_defaults(func=run)


def parse_time(text: str, now_ms: int) -> int:
    """Milliseconds since the epoch of ``now`` or an ISO 8601 time (UTC unless it says otherwise)."""
    if text == "now":
        return now_ms
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


def run(args: argparse.Namespace) -> int:
    now_ms = int(time.time() * 1000)
    try:
        end_ms = parse_time(args.end, now_ms)
        start_ms = parse_time(args.start, now_ms) if args.start else end_ms - 24 * HOUR_MS
    except ValueError as exc:
        print(f"{PROG}: --from/--to: {exc}", file=sys.stderr)
        return 2
    try:
        topology = load_topology(args.topology, args.run_dir)
        streams = trio.run(collect, topology, start_ms, end_ms, args.timeout)
    except TopologyError as exc:
        print(f"{PROG}: {args.topology}: {exc}", file=sys.stderr)
        return 2
    except (AuditError, KafkaError, OSError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    rows = audit(streams)
    if args.metrics_file is not None:
        try:
            write_atomically(args.metrics_file, metrics_text(rows, start_ms, time.time()))
        except OSError as exc:
            print(f"{PROG}: --metrics-file {args.metrics_file}: {exc.strerror}", file=sys.stderr)
            return 2
    if args.output == "json":
        window = {"from_ms": start_ms - start_ms % HOUR_MS, "to_ms": end_ms}
        print(json.dumps({"window": window, "settled": settled(rows), "rows": [r.to_json() for r in rows]}, indent=2))
    else:
        print(render(rows, start_ms, end_ms))
    return 0 if settled(rows) else 1
