"""What ``tributary topics`` and ``tributary groups`` share: their common options,
and running an operation with an :class:`~client.admin.Admin` on the cluster,
turning client errors into one line on stderr and exit status 1."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from tributary.client.admin.admin import Admin
from tributary.client.config import ClientConfig
from tributary.client.errors import KafkaError
from tributary.client.security.settings import (
    PLAINTEXT,
    SecurityConfig,
    SecuritySettingsError,
    read_command_config,
    security_from_settings,
)
from tributary.client.wire.cluster import Cluster
from tributary.deploy.errors import operator_errors

#: Exit status when the cluster refused or failed an operation (bad input is 2, as argparse).
FAILED = 1
USAGE = 2


class CommandError(Exception):
    """An operator error found by the command itself (not the cluster): one line, exit ``status``."""

    def __init__(self, message: str, status: int = USAGE) -> None:
        super().__init__(message)
        self.status = status


def add_common_arguments(parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    """--bootstrap, --output and --timeout, accepted before and after the action
    (the action's copies default to SUPPRESS so they do not overwrite the others)."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument(
        "--bootstrap",
        metavar="HOST:PORT[,HOST:PORT...]",
        default=default(None),
        help="brokers of the cluster (any Kafka-compatible one)",
    )
    parser.add_argument(
        "--output", choices=("table", "json"), default=default("table"), help="human table (default) or JSON"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=default(30.0),
        metavar="SECONDS",
        help="how long an operation keeps retrying (default 30)",
    )
    add_command_config(parser, suppress=suppress)


def add_command_config(parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    """--command-config FILE: the client's security settings, as Kafka's tools take them."""
    parser.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        default=argparse.SUPPRESS if suppress else None,
        help="client settings as Kafka's tools take them: security.protocol, sasl.mechanism, sasl.username, "
        "sasl.password, ssl.ca.location, ... and bootstrap.servers (when --bootstrap is not given), in a "
        "properties file, or TOML when the name ends in .toml",
    )


#: Client settings a --command-config file may hold besides the security ones: Kafka tools'
#: files often name the cluster (used when --bootstrap is not given) and the client id (ignored).
_OTHER_CLIENT_KEYS = ("bootstrap.servers", "client.id")


def command_security(args: argparse.Namespace) -> SecurityConfig:
    """The security of ``--command-config`` (PLAINTEXT without one), its ``bootstrap.servers``
    folded into ``args.bootstrap`` when that was not given; CommandError when the file is bad."""
    path = getattr(args, "command_config", None)
    if path is None:
        return PLAINTEXT
    try:
        settings = read_command_config(path)
        bootstrap = settings.pop("bootstrap.servers", None)
        for key in _OTHER_CLIENT_KEYS:
            settings.pop(key, None)
        security = security_from_settings(settings, base=path.parent)
    except SecuritySettingsError as exc:
        raise CommandError(f"--command-config {path}: {exc}") from None
    if not getattr(args, "bootstrap", None) and bootstrap:
        args.bootstrap = str(bootstrap)
    return security


def _unwrapped(runner: Callable[..., int], *args: Any) -> int:
    """Run; an exception group from the client's nurseries that holds one of the
    errors handled here is reduced to its first such error."""
    try:
        return runner(*args)
    except BaseExceptionGroup as group:
        errors = operator_errors(group, (CommandError, KafkaError, trio.TooSlowError, ValueError))
        if errors is None:
            raise
        raise errors[0] from group


def _client_config(args: argparse.Namespace) -> ClientConfig:
    security = command_security(args)
    if not args.bootstrap:
        raise CommandError("--bootstrap is required")
    return ClientConfig(
        client_id=f"tributary-{args.command}",
        api_timeout=args.timeout,
        request_timeout=args.timeout,
        connect_timeout=min(args.timeout, 10.0),
        security=security,
    )


def run_admin(args: argparse.Namespace, operation: Callable[[Admin], Awaitable[int]]) -> int:
    """Connect to ``args.bootstrap`` and run ``operation``; errors become one stderr line."""
    prog = f"tributary {args.command}"
    try:
        config = _client_config(args)
    except CommandError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return exc.status

    async def main() -> int:
        # The whole command gives up after a while, even if no broker ever answers.
        with trio.fail_after(args.timeout + 5):
            async with Cluster(args.bootstrap, config) as cluster:
                return await operation(Admin(cluster))

    try:
        return _unwrapped(trio.run, main)
    except CommandError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return exc.status
    except KafkaError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return FAILED
    except trio.TooSlowError:
        print(f"{prog}: error: no answer from {args.bootstrap} within {args.timeout + 5:g} s", file=sys.stderr)
        return FAILED
    except ValueError as exc:  # a malformed bootstrap list
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return USAGE
