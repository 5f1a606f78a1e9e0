"""``tributary console``: the operator's page for a running appliance.

    tributary console --topology FILE [--run-dir DIR] [--listen HOST:PORT] [--audit-interval SECONDS]

Serves one page on HOST:PORT (default 127.0.0.1:8480): the clusters and their brokers up or down,
the mirrors and their lag over the last hour, the last loads, and the audit of the last day with
its verdicts; it reloads itself every few seconds. ``/status.json`` is the same as data.
``tributary up`` serves the same page (its ``--console``). Runs until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

import trio

from tributary.deploy.appliance.topology import TopologyError, load_topology
from tributary.deploy.cli.up import add_topology_arguments
from tributary.deploy.console.server import Console

PROG = "tributary console"
DEFAULT_LISTEN = "127.0.0.1:8480"


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "console",
        help="serve the operator's web page for a running appliance",
        description="Serve one web page showing the appliance of a topology: clusters and brokers, "
        "mirror lag over the last hour, the last loads and the audit.",
    )
    add_topology_arguments(parser)
    parser.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT", help=f"default {DEFAULT_LISTEN}")
    parser.add_argument(
        "--audit-interval", type=float, default=60.0, metavar="SECONDS", help="how often the audit runs (default 60)"
    )
    parser.set_defaults(func=run)


async def _serve(console: Console, listen: str) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(console.run, listen)
            print(f"console on http://{host}:{port}/ (Ctrl-C stops it)", flush=True)
            async for _ in signals:
                nursery.cancel_scope.cancel()
                break


def run(args: argparse.Namespace) -> int:
    try:
        topology = load_topology(args.topology, args.run_dir)
    except TopologyError as exc:
        print(f"{PROG}: {args.topology}: {exc}", file=sys.stderr)
        return 2
    console = Console(topology, audit_interval=args.audit_interval)
    failed: list[BaseException] = []
    try:
        trio.run(_serve, console, args.listen)
    except* OSError as group:
        failed.extend(group.exceptions)
    if failed:
        print(f"{PROG}: cannot listen on {args.listen}: {failed[0]}", file=sys.stderr)
        return 1
    return 0
