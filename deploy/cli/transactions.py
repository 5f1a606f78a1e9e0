"""``tributary transactions``: the transactional producers of any Kafka-compatible cluster,
as Kafka's ``kafka-transactions.sh list`` and ``describe`` show them.

    tributary transactions --bootstrap B [--output table|json] list
        [--state STATE ...] [--producer-id N ...] [--duration-filter MS]
    tributary transactions --bootstrap B describe TRANSACTIONAL_ID [TRANSACTIONAL_ID ...]

``list`` asks every broker for the transactional ids it coordinates (ListTransactions);
``--duration-filter`` keeps the transactions open for at least that many milliseconds (a hung
transaction holds back every read_committed consumer of its partitions). ``describe`` asks each
id's coordinator (DescribeTransactions): state, producer id and epoch, timeout, when the open
transaction began and its partitions.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from tributary.client.admin.admin import Admin
from tributary.client.errors import KafkaError
from tributary.deploy.cli.admin_options import FAILED, CommandError, add_common_arguments, run_admin
from tributary.deploy.tables import render_table, to_json
from tributary.protocol.error_codes import ErrorCode


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "transactions",
        help="list and describe transactional producers",
        description="Transactions of a Kafka-compatible cluster: transactional ids, their state and partitions.",
    )
    add_common_arguments(parser)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="every transactional id with its producer id and state")
    listing.add_argument("--state", action="append", default=[], metavar="STATE",
                         help="only ids in this state (Empty, Ongoing, ...); repeat for several")  # fmt: skip
    listing.add_argument("--producer-id", action="append", type=int, default=[], metavar="N",
                         help="only this producer id; repeat for several")  # fmt: skip
    listing.add_argument("--duration-filter", type=int, default=-1, metavar="MS",
                         help="only transactions open for at least MS milliseconds")  # fmt: skip
    listing.set_defaults(func=run_list)

    describe = actions.add_parser("describe", help="state, producer, timeout and partitions of transactional ids")
    describe.add_argument("transactional_ids", nargs="+", metavar="TRANSACTIONAL_ID")
    describe.set_defaults(func=run_describe)

    for action in (listing, describe):
        add_common_arguments(action, suppress=True)


def run_list(args: argparse.Namespace) -> int:
    async def operation(admin: Admin) -> int:
        listed = await admin.list_transactions(
            states=args.state, producer_ids=args.producer_id, duration_ms=args.duration_filter
        )
        rows = [
            {"transactional_id": t.transactional_id, "producer_id": t.producer_id, "state": t.state,
             "coordinator": t.coordinator}
            for t in listed
        ]  # fmt: skip
        if args.output == "json":
            print(to_json(rows))
        else:
            table = [(r["transactional_id"], r["producer_id"], r["state"], r["coordinator"]) for r in rows]
            print(render_table(("TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "COORDINATOR"), table,
                               right=("PRODUCER-ID", "COORDINATOR")))  # fmt: skip
        return 0

    return run_admin(args, operation)


def run_describe(args: argparse.Namespace) -> int:
    async def operation(admin: Admin) -> int:
        rows: list[dict[str, Any]] = []
        now_ms = int(time.time() * 1000)
        for transactional_id in args.transactional_ids:
            try:
                (found,) = (await admin.describe_transactions([transactional_id])).values()
            except KafkaError as exc:
                if exc.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                    raise CommandError(f"no such transactional id: {transactional_id}", status=FAILED) from None
                raise
            open_since = found.start_ms if found.start_ms >= 0 and found.partitions else None
            rows.append(
                {
                    "transactional_id": found.transactional_id,
                    "coordinator": found.coordinator,
                    "producer_id": found.producer_id,
                    "producer_epoch": found.producer_epoch,
                    "state": found.state,
                    "timeout_ms": found.timeout_ms,
                    "start_ms": found.start_ms,
                    "duration_ms": now_ms - open_since if open_since is not None else None,
                    "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in found.partitions],
                }
            )
        if args.output == "json":
            print(to_json(rows))
        else:
            table = [
                (r["transactional_id"], r["coordinator"], r["producer_id"], r["producer_epoch"], r["state"],
                 r["timeout_ms"], r["duration_ms"], _partitions_text(r["partitions"]))
                for r in rows
            ]  # fmt: skip
            headers = ("TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "EPOCH", "STATE", "TIMEOUT-MS",
                       "DURATION-MS", "PARTITIONS")  # fmt: skip
            print(render_table(headers, table, right=("COORDINATOR", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS",
                                                      "DURATION-MS")))  # fmt: skip
        return 0

    return run_admin(args, operation)


def _partitions_text(partitions: list[dict[str, Any]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp["topic"], []).append(tp["partition"])
    return " ".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items())) or "-"
