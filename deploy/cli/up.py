"""``tributary up``: the whole appliance of a topology on this machine, until Ctrl-C or SIGTERM.

    tributary up --topology FILE [--run-dir DIR] [--start-timeout SECONDS] [--grace SECONDS]
                 [--console HOST:PORT|off]

Starts one ZooKeeper per datacenter, every broker and every mirror as supervised
children (deploy/appliance.py), waits until every cluster answers, prints where
everything listens, restarts crashed children with backoff, and on Ctrl-C or
SIGTERM stops mirrors, brokers and ZooKeeper in that order. A second Ctrl-C
stops everything at once (still SIGTERM first, SIGKILL after the grace period).
It also serves the operator's page (``tributary console``) on ``--console``.
"""

from __future__ import annotations

import argparse
import signal
import sys
from functools import partial
from pathlib import Path
from typing import Any

import trio

from tributary.deploy.appliance.launcher import Appliance, ApplianceError, describe
from tributary.deploy.appliance.links import links_table
from tributary.deploy.appliance.topology import TopologyError, load_topology
from tributary.deploy.console.server import serve_console
from tributary.deploy.errors import operator_errors


def operator_error(exc: BaseException) -> ApplianceError:
    """The ApplianceError inside Trio's exception groups; anything else is a bug and is re-raised."""
    errors = operator_errors(exc, (ApplianceError,))
    if errors is None:
        raise exc
    first = errors[0]
    assert isinstance(first, ApplianceError)
    return first


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "up",
        help="run a topology's whole appliance on this machine",
        description="Run one ZooKeeper per datacenter, every broker and every mirror of the topology as "
        "supervised child processes, until Ctrl-C or SIGTERM.",
    )
    add_topology_arguments(parser)
    parser.add_argument(
        "--start-timeout", type=float, default=120.0, metavar="SECONDS", help="how long to wait for each tier to answer"
    )
    parser.add_argument(
        "--grace", type=float, default=15.0, metavar="SECONDS", help="how long a child may take to stop before SIGKILL"
    )
    parser.add_argument(
        "--console",
        default="127.0.0.1:8480",
        metavar="HOST:PORT",
        help="serve the operator's page there (tributary console); 'off' serves none (default 127.0.0.1:8480)",
    )
    parser.add_argument(
        "--console-audit-interval",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how often the console's audit runs (default 60)",
    )
    parser.set_defaults(func=run)


def add_topology_arguments(parser: argparse.ArgumentParser) -> None:
    """--topology and --run-dir, shared with status and demo."""
    parser.add_argument("--topology", required=True, type=Path, metavar="FILE", help="the topology (TOML)")
    parser.add_argument(
        "--run-dir",
        type=Path,
        metavar="DIR",
        help="data, configs and logs (default: the topology's [local] run_dir, else run/<name> beside it)",
    )


def say(line: str) -> None:
    print(line, flush=True)


async def _up(appliance: Appliance, console: str, audit_interval: float) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_on_signals, signals, appliance, nursery.cancel_scope)
            nursery.start_soon(_announce_when_ready, appliance)
            if console != "off":
                nursery.start_soon(
                    partial(serve_console, appliance.topology, console, audit_interval=audit_interval, say=say)
                )
            try:
                await appliance.run()
            finally:
                nursery.cancel_scope.cancel()


async def _on_signals(signals: Any, appliance: Appliance, everything: trio.CancelScope) -> None:
    first: float | None = None
    async for signum in signals:
        name = signal.Signals(signum).name
        if first is None:
            say(f"received {name}: stopping mirrors, brokers, then ZooKeeper")
            appliance.stop()
            first = trio.current_time()
        elif trio.current_time() - first < 1.0:
            # The same stop request delivered twice (to the process and to its group, as
            # `timeout` does, or Ctrl-C in a terminal plus a wrapper script passing it on).
            continue
        else:
            say(f"received {name} again: stopping everything at once")
            everything.cancel()


async def _announce_when_ready(appliance: Appliance) -> None:
    await appliance.ready.wait()
    say("\n" + describe(appliance.components, appliance.supervisor))
    if appliance.topology.mirrors or appliance.topology.loads:
        say("\n" + links_table(appliance.topology))
    if any(cluster.authenticates for cluster in appliance.topology.clusters.values()):
        security = appliance.topology.run_dir / "security"
        say(f"\nCA, certificates and passwords under {security}; an admin's client settings in {security}/clients")
    say(f"\nall up; data and logs under {appliance.topology.run_dir}. Ctrl-C stops everything.\n")


def run(args: argparse.Namespace) -> int:
    try:
        topology = load_topology(args.topology, args.run_dir)
        appliance = Appliance(topology, say=say, start_timeout=args.start_timeout, grace=args.grace)
    except (TopologyError, ApplianceError) as exc:
        print(f"tributary up: {args.topology}: {exc}", file=sys.stderr)
        return 2
    say(f"starting {len(appliance.components)} processes of {topology.path}")
    try:
        trio.run(_up, appliance, args.console, args.console_audit_interval)
    except (ApplianceError, BaseExceptionGroup) as exc:
        print(f"tributary up: {operator_error(exc)}", file=sys.stderr)
        return 1
    say("stopped")
    return 0
