"""``tributary demo``: the README's main command, the whole job end to end on this machine.

    tributary demo [--topology FILE] [--warehouse DIR] [--run-dir DIR] [--events N]

Starts the topology's appliance, produces an activity stream into every mirrored source,
waits for the mirrors, runs the load into the warehouse, prints records per datacenter
and topic at the source, in the aggregate and in Hadoop, bytes raw against compressed,
mirror lag and run time, and stops everything. Exit status 1 when any count disagrees.
See deploy/demo.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import trio

from tributary.deploy.appliance.demo import Demo, DemoError, render
from tributary.deploy.appliance.launcher import ApplianceError
from tributary.deploy.appliance.topology import TopologyError, load_topology
from tributary.deploy.cli.up import operator_error, say

DEFAULT_TOPOLOGY = Path(__file__).resolve().parent / "examples" / "local.toml"


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="run the whole job end to end on this machine and check every count",
        description="Start the topology's appliance, produce page views, searches and clicks into every mirrored "
        "source, wait for the mirrors, load the aggregate into the warehouse, compare the counts at every stage "
        "and stop everything. Exit status 1 when any count disagrees.",
    )
    parser.add_argument(
        "--topology", type=Path, default=DEFAULT_TOPOLOGY, metavar="FILE", help="default: deploy/examples/local.toml"
    )
    parser.add_argument(
        "--warehouse", type=Path, default=Path("warehouse"), metavar="DIR", help="where the load writes (./warehouse)"
    )
    parser.add_argument(
        "--run-dir", type=Path, metavar="DIR", help="data and logs (default: the topology's run_dir + '-demo')"
    )
    parser.add_argument("--events", type=int, default=100_000, metavar="N", help="events per source datacenter")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.events < 1:
        print("tributary demo: --events must be at least 1", file=sys.stderr)
        return 2
    try:
        topology = load_topology(args.topology)
        if args.run_dir is None:
            args.run_dir = topology.run_dir.with_name(topology.run_dir.name + "-demo")
        topology = load_topology(args.topology, args.run_dir)
        demo = Demo(topology, args.warehouse, events=args.events, say=say)
    except (TopologyError, DemoError, ApplianceError) as exc:
        print(f"tributary demo: {args.topology}: {exc}", file=sys.stderr)
        return 2
    try:
        report = trio.run(demo.run)
    except (DemoError, ApplianceError, BaseExceptionGroup) as exc:
        print(f"tributary demo: {operator_error(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("tributary demo: interrupted; everything was stopped", file=sys.stderr)
        return 130
    say(render(report))
    return 1 if report.problems else 0
