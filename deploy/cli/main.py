"""The ``tributary`` command.

Each subcommand lives in its own module and registers itself here; a
subcommand exists only once it works. Command lines are an interface that
operators script against: options may be added, never renamed or dropped.

Only the module of the subcommand being run is imported (the broker need not
load PySpark or pyarrow, and every child process the appliance starts is
quicker to start); ``tributary --help`` and unknown commands import them all.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import version

# Subcommand -> the module that provides ``register(subparsers)``; the parser it adds sets ``func``.
SUBCOMMANDS = {
    "acls": "tributary.deploy.cli.acls",
    "api-versions": "tributary.deploy.cli.api_versions",
    "audit": "tributary.deploy.cli.audit",
    "broker": "tributary.deploy.cli.broker",
    "console": "tributary.deploy.cli.console",
    "groups": "tributary.deploy.cli.groups",
    "load": "tributary.deploy.cli.load",
    "mirror": "tributary.deploy.cli.mirror",
    "status": "tributary.deploy.cli.status",
    "topics": "tributary.deploy.cli.topics",
    "transactions": "tributary.deploy.cli.transactions",
    "up": "tributary.deploy.cli.up",
    "users": "tributary.deploy.cli.users",
    "demo": "tributary.deploy.cli.demo",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every subcommand, or with ``only`` that one."""
    parser = argparse.ArgumentParser(
        prog="tributary", description="Tributary: a multi-datacenter mirroring appliance speaking the Kafka protocol."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('tributary')}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module in SUBCOMMANDS.items():
        if only is None or name == only:
            importlib.import_module(module).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    command = arguments[0] if arguments and arguments[0] in SUBCOMMANDS else None
    args = build_parser(command).parse_args(arguments)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
