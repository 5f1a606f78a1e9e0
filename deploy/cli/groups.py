"""``tributary groups``: list, describe, reset the offsets of, and delete consumer groups
of any Kafka-compatible cluster.

    tributary groups --bootstrap B [--output table|json] list
    tributary groups --bootstrap B describe GROUP [GROUP ...]
    tributary groups --bootstrap B reset-offsets GROUP (--topic T[:P,P...] ... | --all-topics)
        (--to-earliest | --to-latest | --to-datetime WHEN | --shift-by N | --to-offset N) [--execute]
    tributary groups --bootstrap B delete GROUP [GROUP ...]

Consumer groups of both kinds are shown: classic ones (DescribeGroups) and KIP-848
consumer groups (ConsumerGroupDescribe, where the broker offers it); ``GROUP-TYPE``
tells them apart. ``describe`` shows the members with their assignments, and per partition the
committed offset, the end offset and the lag (end - committed). ``reset-offsets``
prints the plan and changes nothing unless given ``--execute``; it refuses while
the group has members (as Kafka's tool does): their commits would overwrite the
reset. New offsets are kept between each partition's earliest and latest offsets.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from tributary.client.admin.admin import Admin, GroupDescription
from tributary.client.errors import UnknownMemberIdError
from tributary.client.wire.metadata import TopicPartition
from tributary.deploy.cli.admin_options import FAILED, CommandError, add_common_arguments, run_admin
from tributary.deploy.tables import render_table, to_json

#: Group states in which a reset is allowed: nobody would commit over it.
INACTIVE = ("Empty", "Dead")


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "groups",
        help="list, describe (with lag), reset offsets of, and delete consumer groups",
        description="Consumer groups of a Kafka-compatible cluster: members, committed offsets and lag.",
    )
    add_common_arguments(parser)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="every group with its state and member count")
    listing.set_defaults(func=run_list)

    describe = actions.add_parser("describe", help="members, assignments, committed offsets and lag")
    describe.add_argument("groups", nargs="+", metavar="GROUP")
    describe.set_defaults(func=run_describe)

    reset = actions.add_parser("reset-offsets", help="move a group's committed offsets (dry run unless --execute)")
    reset.add_argument("group", metavar="GROUP")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:P,P...]",
        help="a topic, or some of its partitions; repeat for several",
    )
    scope.add_argument("--all-topics", action="store_true", help="every topic the group has committed offsets for")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the earliest offset still in the log")
    target.add_argument("--to-latest", action="store_true", help="the end of the log (skip everything)")
    target.add_argument(
        "--to-datetime",
        metavar="WHEN",
        help="the first record at or after WHEN (ISO 8601, e.g. 2024-05-01T12:00:00; UTC unless an offset is given)",
    )
    target.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (negative: back)")
    target.add_argument("--to-offset", type=int, metavar="N", help="offset N")
    reset.add_argument("--execute", action="store_true", help="apply the new offsets (default: only show them)")
    reset.set_defaults(func=run_reset)

    delete = actions.add_parser("delete", help="delete groups without members, with their committed offsets")
    delete.add_argument("groups", nargs="+", metavar="GROUP")
    delete.set_defaults(func=run_delete)

    for action in (listing, describe, reset, delete):
        add_common_arguments(action, suppress=True)


def _member_count(description: GroupDescription | None) -> int | None:
    return None if description is None else len(description.members)


# --- list -----------------------------------------------------------------------------------------


def run_list(args: argparse.Namespace) -> int:
    async def operation(admin: Admin) -> int:
        listings = await admin.list_groups()
        described = await admin.describe_groups([g.group_id for g in listings])
        rows = [
            {
                "group": g.group_id,
                "protocol_type": g.protocol_type,
                "group_type": described[g.group_id].group_type if g.group_id in described else g.group_type or None,
                "state": described[g.group_id].state if g.group_id in described else g.state,
                "members": _member_count(described.get(g.group_id)),
                "coordinator": g.coordinator,
            }
            for g in listings
        ]
        if args.output == "json":
            print(to_json(rows))
        else:
            columns = ("group", "protocol_type", "group_type", "state", "members", "coordinator")
            table = [tuple("-" if r[c] in ("", None) and c.endswith("type") else r[c] for c in columns) for r in rows]
            print(
                render_table(
                    ("GROUP", "TYPE", "GROUP-TYPE", "STATE", "MEMBERS", "COORDINATOR"), table, right=("MEMBERS",)
                )
            )
        return 0

    return run_admin(args, operation)


# --- describe -------------------------------------------------------------------------------------


async def describe_group(admin: Admin, group_id: str) -> dict[str, Any]:
    """Everything ``describe`` shows for one group, as a JSON-ready dict."""
    description = (await admin.describe_groups([group_id]))[group_id]
    committed = await admin.committed_offsets(group_id)
    if description.state == "Dead" and not committed:
        raise CommandError(f"no such group: {group_id}", status=FAILED)
    owner = {tp: m for m in description.members for tp in m.assignment}
    metadata = await admin.cluster.refresh_metadata()
    partitions = sorted(set(committed) | set(owner))
    # Offsets of deleted topics stay committed until they expire: show them without an end.
    existing = [
        tp for tp in partitions if tp.topic in metadata.topics and tp.partition in metadata.topics[tp.topic].partitions
    ]
    latest = await admin.latest_offsets(existing)
    offsets = []
    for tp in partitions:
        commit = committed.get(tp)
        end = latest.get(tp)
        member = owner.get(tp)
        offsets.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "committed_offset": commit.offset if commit is not None else None,
                "end_offset": end,
                "lag": max(end - commit.offset, 0) if commit is not None and end is not None else None,
                "member_id": member.member_id if member is not None else None,
                "client_id": member.client_id if member is not None else None,
            }
        )
    return {
        "group": group_id,
        "state": description.state,
        "protocol_type": description.protocol_type,
        "protocol": description.protocol,
        "group_type": description.group_type,
        "coordinator": description.coordinator,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "group_instance_id": m.group_instance_id,
                "member_epoch": m.member_epoch if description.group_type == "consumer" else None,
                "assignment": [{"topic": tp.topic, "partition": tp.partition} for tp in m.assignment],
            }
            for m in description.members
        ],
        "offsets": offsets,
        "total_lag": sum(o["lag"] for o in offsets if o["lag"] is not None),
    }


def _assignment_text(assignment: Sequence[dict[str, Any]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp["topic"], []).append(tp["partition"])
    return " ".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items())) or "-"


def render_group(group: dict[str, Any]) -> str:
    header = (
        f"Group: {group['group']}  state: {group['state']}  protocol: {group['protocol'] or '-'}"
        f"  group type: {group['group_type']}  coordinator: {group['coordinator']}"
        f"  members: {len(group['members'])}  total lag: {group['total_lag']}"
    )
    parts = [header]
    if group["members"]:
        parts.append(
            render_table(
                ("MEMBER", "CLIENT-ID", "HOST", "ASSIGNMENT"),
                [
                    (m["member_id"], m["client_id"], m["host"], _assignment_text(m["assignment"]))
                    for m in group["members"]
                ],
            )
        )
    parts.append(
        render_table(
            ("TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "CLIENT-ID"),
            [
                (o["topic"], o["partition"], o["committed_offset"], o["end_offset"], o["lag"], o["client_id"])
                for o in group["offsets"]
            ],
            right=("PARTITION", "COMMITTED", "END", "LAG"),
        )
    )
    return "\n".join(parts)


def run_describe(args: argparse.Namespace) -> int:
    async def operation(admin: Admin) -> int:
        groups = [await describe_group(admin, g) for g in dict.fromkeys(args.groups)]
        if args.output == "json":
            print(to_json(groups))
        else:
            print("\n\n".join(render_group(g) for g in groups))
        return 0

    return run_admin(args, operation)


# --- reset-offsets --------------------------------------------------------------------------------


def parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """``clicks`` -> ("clicks", None); ``clicks:0,2`` -> ("clicks", [0, 2])."""
    topic, sep, rest = spec.partition(":")
    if not topic:
        raise CommandError(f"--topic {spec!r}: no topic name")
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in rest.split(",") if p.strip()})
    except ValueError:
        raise CommandError(f"--topic {spec!r}: partitions must be numbers, as in {topic}:0,1") from None
    if not partitions:
        raise CommandError(f"--topic {spec!r}: no partitions after ':'")
    return topic, partitions


def parse_datetime(text: str) -> int:
    """Milliseconds since the epoch; a time without a UTC offset is UTC."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"--to-datetime {text!r}: expected ISO 8601, e.g. 2024-05-01T12:00:00") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


async def _reset_partitions(
    admin: Admin, args: argparse.Namespace, committed: set[TopicPartition]
) -> list[TopicPartition]:
    if args.all_topics:
        if not committed:
            raise CommandError(f"group {args.group} has no committed offsets: name topics with --topic", status=FAILED)
        return sorted(committed)
    metadata = await admin.cluster.refresh_metadata()
    chosen: set[TopicPartition] = set()
    for spec in args.topic:
        topic, partitions = parse_topic_spec(spec)
        info = metadata.topics.get(topic)
        if info is None:
            raise CommandError(f"no such topic: {topic}", status=FAILED)
        unknown = sorted(set(partitions or ()) - set(info.partitions))
        if unknown:
            raise CommandError(f"topic {topic} has no partition {', '.join(map(str, unknown))}", status=FAILED)
        chosen |= {TopicPartition(topic, p) for p in (partitions if partitions is not None else info.partitions)}
    return sorted(chosen)


async def plan_reset(admin: Admin, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per partition: the committed offset now and the new one, kept within the log."""
    committed = {tp: c.offset for tp, c in (await admin.committed_offsets(args.group)).items()}
    partitions = await _reset_partitions(admin, args, set(committed))
    earliest = await admin.earliest_offsets(partitions)
    latest = await admin.latest_offsets(partitions)
    wanted: dict[TopicPartition, int]
    if args.to_earliest:
        wanted = earliest
    elif args.to_latest:
        wanted = latest
    elif args.to_offset is not None:
        wanted = dict.fromkeys(partitions, args.to_offset)
    elif args.shift_by is not None:
        without = [f"{tp.topic}-{tp.partition}" for tp in partitions if tp not in committed]
        if without:
            raise CommandError(f"--shift-by needs committed offsets; none for {', '.join(without)}", status=FAILED)
        wanted = {tp: committed[tp] + args.shift_by for tp in partitions}
    else:
        stamp = parse_datetime(args.to_datetime)
        listed = await admin.list_offsets(dict.fromkeys(partitions, stamp))
        # No record that recent: the end of the log, as Kafka's tool does.
        wanted = {tp: listed[tp].offset if listed[tp].offset >= 0 else latest[tp] for tp in partitions}
    return [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "current_offset": committed.get(tp),
            "new_offset": min(max(wanted[tp], earliest[tp]), latest[tp]),
        }
        for tp in partitions
    ]


def run_reset(args: argparse.Namespace) -> int:
    async def operation(admin: Admin) -> int:
        description = (await admin.describe_groups([args.group]))[args.group]
        if description.state not in INACTIVE:
            raise CommandError(
                f"group {args.group} is active (state {description.state}, {len(description.members)} members): "
                "stop its consumers before resetting its offsets",
                status=FAILED,
            )
        plan = await plan_reset(admin, args)
        if args.execute:
            new = {TopicPartition(r["topic"], r["partition"]): r["new_offset"] for r in plan}
            try:
                await admin.alter_committed_offsets(args.group, new)
            except UnknownMemberIdError:
                raise CommandError(
                    f"group {args.group} became active during the reset: nothing was changed", status=FAILED
                ) from None
        if args.output == "json":
            print(to_json({"group": args.group, "executed": args.execute, "offsets": plan}))
        else:
            print(
                render_table(
                    ("TOPIC", "PARTITION", "CURRENT", "NEW"),
                    [(r["topic"], r["partition"], r["current_offset"], r["new_offset"]) for r in plan],
                    right=("PARTITION", "CURRENT", "NEW"),
                )
            )
            if args.execute:
                print(f"reset the offsets of group {args.group} for {len(plan)} partitions")
            else:
                print("dry run: nothing changed; add --execute to apply")
        return 0

    return run_admin(args, operation)


# --- delete -----------------------------------------------------------------------------------------


def run_delete(args: argparse.Namespace) -> int:
    async def operation(admin: Admin) -> int:
        groups = list(dict.fromkeys(args.groups))
        await admin.delete_groups(groups, timeout=args.timeout)
        if args.output == "json":
            print(to_json({"deleted": groups}))
        else:
            print("\n".join(f"deleted group {g}" for g in groups))
        return 0

    return run_admin(args, operation)
