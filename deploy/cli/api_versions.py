"""``tributary api-versions``: the Kafka APIs and versions Tributary speaks, and a live broker's.

    tributary api-versions [--output table|json]
    tributary api-versions --bootstrap HOST:PORT[,HOST:PORT...] [--output table|json] [--timeout S]

Without ``--bootstrap``: the table the broker advertises in its ApiVersions response. With it:
the ApiVersions answer of the first broker of the list that answers, side by side with what this
package's broker serves and what its client sends (the newest version both sides know, "-" when
there is none). Operators compare a cluster against a client's needs with it (``kcat -X
debug=protocol`` prints what a client wants).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import trio

from tributary.client.config import ClientConfig
from tributary.client.errors import KafkaError
from tributary.client.wire.connection import connect
from tributary.deploy.tables import render_table
from tributary.protocol.messages import API_MESSAGES, ApiKey
from tributary.protocol.schema import Versions
from tributary.protocol.supported import CLIENT_VERSIONS, SUPPORTED_VERSIONS

FAILED = 1
USAGE = 2


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "api-versions",
        help="list the Kafka APIs and versions Tributary speaks (and a live broker's, with --bootstrap)",
    )
    parser.add_argument("--output", choices=("table", "json"), default="table", help="output format")
    parser.add_argument(
        "--bootstrap",
        metavar="HOST:PORT[,HOST:PORT...]",
        default=None,
        help="ask a live broker (the first of the list that answers) and show its versions beside ours",
    )
    parser.add_argument(
        "--timeout", type=float, default=10.0, metavar="SECONDS", help="how long to wait for a broker (default 10)"
    )
    parser.set_defaults(func=run)


def _name(key: int) -> str:
    if key in ApiKey._value2member_map_:
        return str(API_MESSAGES[ApiKey(key)][0].__name__.removesuffix("Request"))
    return f"(API {key})"


def _range(versions: tuple[int, int] | None) -> str:
    return "-" if versions is None else f"{versions[0]}-{versions[1]}"


def _ours(table: dict[ApiKey, Versions], key: int) -> tuple[int, int] | None:
    versions = table.get(key)  # type: ignore[call-overload]
    if versions is None:
        return None
    return versions.lo, versions.hi if versions.hi is not None else versions.lo


def _common(a: tuple[int, int] | None, b: tuple[int, int] | None) -> int | None:
    """The newest version both ranges hold."""
    if a is None or b is None or max(a[0], b[0]) > min(a[1], b[1]):
        return None
    return min(a[1], b[1])


def _local(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = [
        {"api_key": int(key), "name": _name(key), "min_version": versions.lo, "max_version": versions.hi}
        for key, versions in sorted(SUPPORTED_VERSIONS.items())
    ]
    if args.output == "json":
        print(json.dumps(rows, indent=2))
        return 0
    table = [(r["api_key"], r["name"], f"{r['min_version']}-{r['max_version']}") for r in rows]
    print(render_table(("KEY", "API", "VERSIONS"), table, right=("KEY",)))
    return 0


async def _ask(bootstrap: str, timeout: float) -> tuple[str, dict[int, tuple[int, int]]]:
    """(address, ranges) of the first broker of ``bootstrap`` that negotiates."""
    failures = []
    config = ClientConfig(client_id="tributary-api-versions", connect_timeout=timeout)
    for address in (a.strip() for a in bootstrap.split(",") if a.strip()):
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"--bootstrap: {address!r} is not HOST:PORT")
        try:
            async with connect(host.strip("[]"), int(port), config=config) as conn:
                return address, dict(conn.versions.ranges)
        except KafkaError as exc:
            failures.append(f"{address}: {exc}")
    raise KafkaError("no broker answered: " + "; ".join(failures or ["empty --bootstrap"]))


def _live(args: argparse.Namespace) -> int:
    try:
        address, ranges = trio.run(_ask, args.bootstrap, args.timeout)
    except ValueError as exc:
        print(f"tributary api-versions: error: {exc}", file=sys.stderr)
        return USAGE
    except KafkaError as exc:
        print(f"tributary api-versions: error: {exc}", file=sys.stderr)
        return FAILED
    keys = sorted(set(ranges) | {int(k) for k in SUPPORTED_VERSIONS} | {int(k) for k in CLIENT_VERSIONS})
    rows: list[dict[str, Any]] = []
    table = []
    for key in keys:
        theirs, ours, client = ranges.get(key), _ours(SUPPORTED_VERSIONS, key), _ours(CLIENT_VERSIONS, key)
        uses = _common(theirs, client)
        rows.append(
            {
                "api_key": key,
                "name": _name(key),
                "broker": _as_json(theirs),
                "tributary_broker": _as_json(ours),
                "tributary_client": _as_json(client),
                "client_uses": uses,
            }
        )
        table.append((key, _name(key), _range(theirs), _range(ours), _range(client), "-" if uses is None else uses))
    if args.output == "json":
        print(json.dumps({"broker": address, "apis": rows}, indent=2))
        return 0
    print(f"broker {address}")
    print(
        render_table(
            ("KEY", "API", "BROKER", "TRIBUTARY BROKER", "TRIBUTARY CLIENT", "CLIENT USES"),
            table,
            right=("KEY", "CLIENT USES"),
        )
    )
    return 0


def _as_json(versions: tuple[int, int] | None) -> dict[str, int] | None:
    return None if versions is None else {"min_version": versions[0], "max_version": versions[1]}


def run(args: argparse.Namespace) -> int:
    return _live(args) if args.bootstrap else _local(args)
