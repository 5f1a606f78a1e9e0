"""``tributary status``: one table of everything a topology runs, asked of the components.

    tributary status --topology FILE [--run-dir DIR] [--output table|json] [--timeout SECONDS]

Rows: every ZooKeeper server and broker (up or down), every topic with its partitions
and records (naming partitions under-replicated or offline), every mirror with its lag
(records, seconds) from its metrics endpoint, and every load's last run with its counts
(from the loader's metrics file). What does not answer shows as down with the reason.
Exit status: 0 when everything is up, 3 when something is down (as `systemctl status`;
an offline partition counts), 2 for a bad topology.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import trio

from tributary.deploy.appliance.status import Status, TopicStatus, collect
from tributary.deploy.appliance.topology import TopologyError, load_topology
from tributary.deploy.cli.up import add_topology_arguments
from tributary.deploy.tables import render_table


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "status",
        help="one table: clusters, brokers, topics, mirror lag, last load",
        description="Ask every component of the topology whether it is up, and show topics, mirror lag and "
        "the last load run. Exit status 0 when everything is up, 3 when something is down.",
    )
    add_topology_arguments(parser)
    parser.add_argument("--output", choices=("table", "json"), default="table", help="output format")
    parser.add_argument("--timeout", type=float, default=3.0, metavar="SECONDS", help="per probe (default 3)")
    parser.set_defaults(func=run)


def _number(value: float | None, unit: str = "", digits: int = 0) -> str:
    if value is None:
        return "?"
    return f"{value:,.{digits}f}{unit}"


def _ago(timestamp: float | None, now: float) -> str:
    if timestamp is None:
        return "?"
    seconds = max(0.0, now - timestamp)
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _topic_health(topic: TopicStatus) -> tuple[str, str]:
    """(state, details) of a topic row: OFFLINE or under-replicated partitions named."""
    detail = f"{topic.partitions} partitions, {_number(topic.records)} records"
    state = ""
    if topic.offline:
        detail += f"; OFFLINE partitions {','.join(map(str, topic.offline))}"
        state = "OFFLINE"
    if topic.under_replicated:
        detail += f"; under-replicated partitions {','.join(map(str, topic.under_replicated))}"
        state = state or "under-replicated"
    return state, detail


def rows(status: Status) -> list[tuple[str, str, str, str, str]]:
    """(kind, name, address, state, details) for every component, in topology order."""
    out: list[tuple[str, str, str, str, str]] = []
    for cluster in status.clusters:
        for zk in cluster.zookeeper:
            out.append(("zookeeper", cluster.name, zk.address, "up" if zk.up else "DOWN", zk.error))
        for broker in cluster.brokers:
            broker_id = broker.name.split()[-1]
            detail = "controller" if cluster.controller is not None and str(cluster.controller) == broker_id else ""
            out.append(
                (
                    "broker",
                    f"{cluster.name}/{broker_id}",
                    broker.address,
                    "up" if broker.up else "DOWN",
                    broker.error or detail,
                )
            )
        for topic in cluster.topics:
            out.append(("topic", f"{cluster.name}/{topic.name}", "", *_topic_health(topic)))
        if cluster.error:
            out.append(("topic", f"{cluster.name}/*", "", "?", cluster.error))
    for mirror in status.mirrors:
        if not mirror.instances:
            out.append(("mirror", mirror.alias, "", "?", f"{mirror.source} -> {mirror.target}; no metrics_port to ask"))
            continue
        up = sum(1 for e in mirror.instances if e.up)
        state = "up" if mirror.up else "DOWN"
        if up:
            detail = (
                f"{mirror.source} -> {mirror.target}: lag {_number(mirror.lag_records)} records"
                f" / {_number(mirror.lag_seconds, ' s', 1)}, copied {_number(mirror.copied_records)} records"
            )
            if mirror.links_up is False:
                detail += ", a link is DOWN"
        else:
            detail = "; ".join(e.error for e in mirror.instances)
        addresses = ",".join(e.address for e in mirror.instances)
        out.append(
            (
                "mirror",
                mirror.alias + (f" ({up}/{len(mirror.instances)})" if len(mirror.instances) > 1 else ""),
                addresses,
                state,
                detail,
            )
        )
    for load in status.loads:
        if not load.ran:
            out.append(("load", load.name, load.output, "never", load.error))
            continue
        result = "ok" if load.success else "FAILED" if load.success is False else "?"
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(load.last_run)) if load.last_run else "?"
        detail = (
            f"last run {when} ({_ago(load.last_run, status.checked_at)}): {_number(load.records)} records, "
            f"{_number(load.bytes)} bytes in {_number(load.duration_seconds, ' s', 1)}, {_number(load.gaps)} gaps"
        )
        out.append(("load", load.name, load.output, result, detail))
    return out


def render(status: Status) -> str:
    table = render_table(("KIND", "NAME", "ADDRESS", "STATE", "DETAILS"), rows(status))
    verdict = "everything is up" if status.all_up else "something is DOWN"
    return "\n".join([table, "", f"{status.topology}: {verdict}"])


def run(args: argparse.Namespace) -> int:
    try:
        topology = load_topology(args.topology, args.run_dir)
    except TopologyError as exc:
        print(f"tributary status: {args.topology}: {exc}", file=sys.stderr)
        return 2
    status = trio.run(collect, topology, args.timeout)
    if args.output == "json":
        print(json.dumps(status.to_json(), indent=2))
    else:
        print(render(status))
    return 0 if status.all_up else 3
