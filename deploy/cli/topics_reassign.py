"""``tributary topics reassign``: move partitions between brokers, with Kafka's reassignment JSON
(kafka-reassign-partitions: the same options, files and messages).

    tributary topics --bootstrap B reassign --generate --topics-to-move-json-file F --broker-list 1,2,3
    tributary topics --bootstrap B reassign --execute --reassignment-json-file F
    tributary topics --bootstrap B reassign --verify --reassignment-json-file F
    tributary topics --bootstrap B reassign --cancel --reassignment-json-file F
    tributary topics --bootstrap B reassign --list

A reassignment file is ``{"version": 1, "partitions": [{"topic": T, "partition": P, "replicas":
[B, ...]}]}`` (``log_dirs``, if present, must be "any": there is one log directory per broker).
``--execute`` prints the current assignment first, in the same format, to keep for a rollback.
The new replicas copy the partition from its leader while it stays online; once all of them are
in sync the old ones are dropped. ``--verify`` exits with status 0 once every move in the file
is complete, 1 while any is still in progress or ended elsewhere.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tributary.broker.cluster.controller import assign_replicas
from tributary.client.admin.admin import Admin
from tributary.client.wire.metadata import TopicPartition
from tributary.deploy.cli.admin_options import CommandError, run_admin
from tributary.deploy.tables import to_json
from tributary.protocol.error_codes import ErrorCode

Plan = dict[TopicPartition, tuple[int, ...]]


def register_action(actions: Any) -> argparse.ArgumentParser:
    reassign: argparse.ArgumentParser = actions.add_parser(
        "reassign",
        help="move partitions to other brokers (kafka-reassign-partitions, Kafka's reassignment JSON)",
    )
    mode = reassign.add_mutually_exclusive_group(required=True)
    mode.add_argument("--generate", action="store_true", help="propose an assignment over --broker-list")
    mode.add_argument("--execute", action="store_true", help="start the reassignment in the file")
    mode.add_argument("--verify", action="store_true", help="report whether the file's moves are complete")
    mode.add_argument("--cancel", action="store_true", help="cancel the file's moves still in progress")
    mode.add_argument("--list", action="store_true", help="every partition move in progress")
    reassign.add_argument("--reassignment-json-file", type=Path, metavar="FILE", help="the moves, Kafka's format")
    reassign.add_argument(
        "--topics-to-move-json-file", type=Path, metavar="FILE", help='--generate: {"topics": [{"topic": T}, ...]}'
    )
    reassign.add_argument("--broker-list", metavar="IDS", help="--generate: the brokers to spread over, 1,2,3")
    reassign.set_defaults(func=run_reassign)
    return reassign


def parse_reassignment(text: str) -> Plan:
    """Kafka's reassignment JSON: a target replica list per partition, checked for shape."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"the reassignment file is not JSON: {exc}") from None
    entries = value.get("partitions") if isinstance(value, dict) else None
    if not isinstance(entries, list) or not entries:
        raise CommandError('the reassignment file needs a non-empty "partitions" list')
    plan: Plan = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise CommandError(f"not a partition entry: {entry!r}")
        topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if not isinstance(topic, str) or not isinstance(partition, int) or isinstance(partition, bool):
            raise CommandError(f"a partition entry needs a topic and a partition number: {entry!r}")
        if not isinstance(replicas, list) or not replicas or not all(isinstance(r, int) for r in replicas):
            raise CommandError(f"{topic}-{partition}: replicas must be a non-empty list of broker ids")
        log_dirs = entry.get("log_dirs")
        if log_dirs is not None and (not isinstance(log_dirs, list) or any(d != "any" for d in log_dirs)):
            raise CommandError(f'{topic}-{partition}: log_dirs other than "any" are not supported')
        tp = TopicPartition(topic, partition)
        if tp in plan:
            raise CommandError(f"{topic}-{partition} appears twice in the reassignment file")
        plan[tp] = tuple(replicas)
    return plan


def format_reassignment(plan: Mapping[TopicPartition, Sequence[int]]) -> str:
    """Kafka's reassignment JSON for ``plan``, on one line as kafka-reassign-partitions prints it."""
    partitions = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas), "log_dirs": ["any"] * len(replicas)}
        for tp, replicas in sorted(plan.items(), key=lambda item: (item[0].topic, item[0].partition))
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def _ids(brokers: Sequence[int]) -> str:
    return ",".join(str(b) for b in brokers)


def _names(partitions: Sequence[TopicPartition]) -> str:
    return ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(partitions, key=lambda tp: (tp.topic, tp.partition)))


async def current_assignment(admin: Admin, partitions: Sequence[TopicPartition]) -> Plan:
    topics = await admin.list_topics(internal=True)
    plan: Plan = {}
    for tp in partitions:
        info = topics.get(tp.topic)
        found = info.partitions.get(tp.partition) if info is not None else None
        if found is None:
            raise CommandError(f"{tp.topic}-{tp.partition} does not exist")
        plan[tp] = tuple(found.replicas)
    return plan


def run_reassign(args: argparse.Namespace) -> int:
    async def operation(admin: Admin) -> int:
        if args.list:
            return await _list(args, admin)
        if args.generate:
            return await _generate(args, admin)
        if args.reassignment_json_file is None:
            raise CommandError("--execute, --verify and --cancel need --reassignment-json-file")
        try:
            plan = parse_reassignment(args.reassignment_json_file.read_text())
        except OSError as exc:
            raise CommandError(f"cannot read {args.reassignment_json_file}: {exc}") from None
        if args.execute:
            return await _execute(args, admin, plan)
        if args.cancel:
            return await _cancel(args, admin, plan)
        return await _verify(args, admin, plan)

    return run_admin(args, operation)


async def _execute(args: argparse.Namespace, admin: Admin, plan: Plan) -> int:
    current = await current_assignment(admin, list(plan))
    outcome = await admin.alter_partition_reassignments(plan, timeout=args.timeout)
    started = [tp for tp, (code, _) in outcome.items() if code == ErrorCode.NONE]
    failed = {tp: result for tp, result in outcome.items() if result[0] != ErrorCode.NONE}
    if args.output == "json":
        print(to_json({
            "current": json.loads(format_reassignment(current)),
            "started": [{"topic": tp.topic, "partition": tp.partition} for tp in started],
            "failed": [{"topic": tp.topic, "partition": tp.partition, "error": code.name, "message": message}
                       for tp, (code, message) in failed.items()],
        }))  # fmt: skip
    else:
        print("Current partition replica assignment\n")
        print(format_reassignment(current))
        print("\nSave this to use as the --reassignment-json-file option during rollback")
        if started:
            print(f"Successfully started partition reassignments for {_names(started)}")
        for tp, (code, message) in failed.items():
            print(f"Error reassigning partition(s):\n{tp.topic}-{tp.partition}: {code.name}: {message or ''}")
    return 1 if failed else 0


async def _cancel(args: argparse.Namespace, admin: Admin, plan: Plan) -> int:
    ongoing = await admin.list_partition_reassignments(list(plan), timeout=args.timeout)
    moving = [tp for tp in plan if tp in ongoing]
    outcome = await admin.alter_partition_reassignments(dict.fromkeys(moving), timeout=args.timeout) if moving else {}
    cancelled = [tp for tp, (code, _) in outcome.items() if code == ErrorCode.NONE]
    failed = {tp: result for tp, result in outcome.items() if result[0] != ErrorCode.NONE}
    if args.output == "json":
        print(to_json({"cancelled": [{"topic": tp.topic, "partition": tp.partition} for tp in cancelled],
                       "failed": [{"topic": tp.topic, "partition": tp.partition, "error": code.name}
                                  for tp, (code, _) in failed.items()]}))  # fmt: skip
    else:
        print(f"Successfully cancelled partition reassignments for: {_names(cancelled) or '(none in progress)'}")
        for tp, (code, message) in failed.items():
            print(f"Error cancelling {tp.topic}-{tp.partition}: {code.name}: {message or ''}")
    return 1 if failed else 0


async def _verify(args: argparse.Namespace, admin: Admin, plan: Plan) -> int:
    ongoing = await admin.list_partition_reassignments(list(plan), timeout=args.timeout)
    current = await current_assignment(admin, list(plan))
    rows = []
    for tp, target in sorted(plan.items(), key=lambda item: (item[0].topic, item[0].partition)):
        if tp in ongoing:
            state, line = "in_progress", f"Reassignment of partition {tp.topic}-{tp.partition} is still in progress."
        elif current[tp] == target:
            state, line = "completed", f"Reassignment of partition {tp.topic}-{tp.partition} is completed."
        else:
            state = "elsewhere"
            line = (f"There is no active reassignment of partition {tp.topic}-{tp.partition}, but replica set is "
                    f"{list(current[tp])} rather than {list(target)}.")  # fmt: skip
        rows.append(({"topic": tp.topic, "partition": tp.partition, "state": state,
                      "replicas": list(current[tp]), "target": list(target)}, line))  # fmt: skip
    if args.output == "json":
        print(to_json([row for row, _ in rows]))
    else:
        print("Status of partition reassignment:")
        for _, line in rows:
            print(line)
    return 0 if all(row["state"] == "completed" for row, _ in rows) else 1


async def _list(args: argparse.Namespace, admin: Admin) -> int:
    ongoing = await admin.list_partition_reassignments(timeout=args.timeout)
    rows = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(r.replicas),
         "adding": list(r.adding), "removing": list(r.removing)}
        for tp, r in sorted(ongoing.items(), key=lambda item: (item[0].topic, item[0].partition))
    ]  # fmt: skip
    if args.output == "json":
        print(to_json(rows))
    elif not rows:
        print("No partition reassignments found.")
    else:
        print("Current partition reassignments:")
        for tp, r in sorted(ongoing.items(), key=lambda item: (item[0].topic, item[0].partition)):
            print(f"{tp.topic}-{tp.partition}: replicas: {_ids(r.replicas)}. adding: {_ids(r.adding)}. "
                  f"removing: {_ids(r.removing)}.")  # fmt: skip
    return 0


async def _generate(args: argparse.Namespace, admin: Admin) -> int:
    if args.topics_to_move_json_file is None or args.broker_list is None:
        raise CommandError("--generate needs --topics-to-move-json-file and --broker-list")
    try:
        value = json.loads(args.topics_to_move_json_file.read_text())
        names = [entry["topic"] for entry in value["topics"]]
        brokers = sorted({int(b) for b in args.broker_list.split(",") if b.strip()})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CommandError(f"--generate: {exc}") from None
    if not brokers:
        raise CommandError("--broker-list names no broker")
    topics = await admin.list_topics(internal=True)
    racks = {b.node_id: b.rack for b in admin.cluster.metadata.brokers.values()}
    current: Plan = {}
    proposed: Plan = {}
    for name in names:
        info = topics.get(name)
        if info is None:
            raise CommandError(f"topic {name} does not exist")
        replication_factor = max(len(p.replicas) for p in info.partitions.values())
        if replication_factor > len(brokers):
            raise CommandError(
                f"{name} has {replication_factor} replicas per partition: more than {len(brokers)} brokers"
            )
        for index, found in info.partitions.items():
            current[TopicPartition(name, index)] = tuple(found.replicas)
        # Kafka's placement (the one topic creation uses, rack-aware), over the given brokers.
        placed = assign_replicas(brokers, len(info.partitions), replication_factor, start=0, shift=0, racks=racks)
        for index, replicas in placed.items():
            proposed[TopicPartition(name, index)] = tuple(replicas)
    if args.output == "json":
        print(to_json({"current": json.loads(format_reassignment(current)),
                       "proposed": json.loads(format_reassignment(proposed))}))  # fmt: skip
    else:
        print("Current partition replica assignment")
        print(format_reassignment(current))
        print("\nProposed partition reassignment configuration")
        print(format_reassignment(proposed))
    return 0


__all__ = ["format_reassignment", "parse_reassignment", "register_action"]
