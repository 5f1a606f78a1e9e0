"""The ``tributary`` command.

Each subcommand lives in its own module and registers itself here; a
subcommand exists only once it works. Command lines are an interface that
operators script against: options may be added, never renamed or dropped.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import version

from . import cmd_api_versions, cmd_broker, cmd_groups, cmd_load, cmd_mirror, cmd_status, cmd_topics, cmd_up

# Each module provides ``register(subparsers)``; the parser it adds sets ``func``.
SUBCOMMANDS = (cmd_api_versions, cmd_broker, cmd_groups, cmd_load, cmd_mirror, cmd_status, cmd_topics, cmd_up)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tributary", description="Tributary: a multi-datacenter mirroring appliance speaking the Kafka protocol."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('tributary')}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in SUBCOMMANDS:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
