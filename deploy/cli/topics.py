"""``tributary topics``: list, describe, create, delete and alter topics of any
Kafka-compatible cluster.

    tributary topics --bootstrap B [--output table|json] list [--internal]
    tributary topics --bootstrap B describe [TOPIC ...]
    tributary topics --bootstrap B create TOPIC --partitions N [--config K=V ...] [--if-not-exists]
    tributary topics --bootstrap B delete TOPIC [TOPIC ...]
    tributary topics --bootstrap B alter TOPIC [--partitions N] [--config K=V ...] [--delete-config K ...]
    tributary topics --bootstrap B describe --under-replicated-partitions | --unavailable-partitions
    tributary topics --bootstrap B elect-leaders [--topic T [--partition N]]
    tributary topics --bootstrap B reassign --execute|--verify|--cancel --reassignment-json-file F
    tributary topics --bootstrap B reassign --generate --topics-to-move-json-file F --broker-list 1,2,3
    tributary topics --bootstrap B delete-records --offset-json-file F

Sizes are bytes on disk as the brokers report them (DescribeLogDirs); a broker
that does not report them shows "-" (null in JSON). ``describe`` shows per
partition its leader, earliest and latest offsets and size, then the topic's
configs with where each value comes from (set on the topic, the broker's
configuration, or the default).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from tributary.client.admin.admin import Admin
from tributary.client.admin.configs import ConfigEntry, ConfigSource, ResourceType
from tributary.client.errors import UnsupportedVersionError
from tributary.client.wire.metadata import TopicPartition
from tributary.deploy.cli import topics_delete_records, topics_reassign
from tributary.deploy.cli.admin_options import CommandError, add_common_arguments, run_admin
from tributary.deploy.tables import human_bytes, render_table, to_json
from tributary.protocol.error_codes import ErrorCode


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "topics",
        help="list, describe, create, delete and alter topics",
        description="Topics of a Kafka-compatible cluster: partitions, offsets, sizes and configs.",
    )
    add_common_arguments(parser)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="topic names, partition counts and sizes")
    listing.add_argument("--internal", action="store_true", help="include internal topics (__consumer_offsets)")
    listing.set_defaults(func=run_list)

    elect = actions.add_parser(
        "elect-leaders",
        help="move partitions back to their preferred replica (kafka-leader-election --election-type PREFERRED)",
    )
    elect.add_argument("--topic", metavar="TOPIC", help="only this topic (default: every partition)")
    elect.add_argument("--partition", type=int, metavar="N", help="only this partition of --topic")
    elect.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition of every topic (the default)"
    )
    elect.set_defaults(func=run_elect_leaders)
    reassign = topics_reassign.register_action(actions)
    delete_records = topics_delete_records.register_action(actions)

    describe = actions.add_parser("describe", help="partitions (leader, offsets, size) and configs of topics")
    describe.add_argument("topics", nargs="*", metavar="TOPIC", help="default: every topic")
    describe.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="only partitions whose ISR is smaller than their replica set, internal topics included "
        "(exit status 1 when there are any); what a rolling restart waits to see empty",
    )
    describe.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="only partitions without a live leader, internal topics included (exit status 1 when there are any)",
    )
    describe.set_defaults(func=run_describe)

    create = actions.add_parser("create", help="create a topic")
    create.add_argument("topic", metavar="TOPIC")
    create.add_argument("--partitions", type=int, default=-1, metavar="N", help="default: the broker's default")
    create.add_argument("--replication-factor", type=int, default=-1, metavar="N", help="default: the broker's")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="a topic config; repeat")
    create.add_argument("--if-not-exists", action="store_true", help="succeed if the topic exists already")
    create.set_defaults(func=run_create)

    delete = actions.add_parser("delete", help="delete topics and their data")
    delete.add_argument("topics", nargs="+", metavar="TOPIC")
    delete.set_defaults(func=run_delete)

    alter = actions.add_parser("alter", help="add partitions to a topic and change its configs")
    alter.add_argument("topic", metavar="TOPIC")
    alter.add_argument("--partitions", type=int, metavar="N", help="the new (larger) partition count")
    alter.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="set a config; repeat")
    alter.add_argument(
        "--delete-config", action="append", default=[], metavar="KEY", help="reset a config to its default; repeat"
    )
    alter.set_defaults(func=run_alter)

    for action in (listing, describe, create, delete, alter, elect, reassign, delete_records):
        add_common_arguments(action, suppress=True)


def parse_configs(items: Sequence[str]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"--config {item!r}: expected KEY=VALUE")
        configs[key.strip()] = value.strip()
    return configs


def _source(entry: ConfigEntry) -> str:
    if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG or (
        entry.source == ConfigSource.UNKNOWN and not entry.is_default
    ):
        return "topic"
    if entry.source == ConfigSource.STATIC_BROKER_CONFIG:
        return "broker"
    return "default"


# --- list -----------------------------------------------------------------------------------------


def run_list(args: argparse.Namespace) -> int:
    async def operation(admin: Admin) -> int:
        topics = await admin.list_topics(internal=args.internal)
        sizes = await admin.log_dir_sizes()
        rows: list[dict[str, Any]] = []
        for name in sorted(topics):
            reported = [
                sizes[TopicPartition(name, p)] for p in topics[name].partitions if TopicPartition(name, p) in sizes
            ]
            rows.append(
                {
                    "topic": name,
                    "partitions": len(topics[name].partitions),
                    "size_bytes": sum(reported) if reported else None,
                }
            )
        if args.output == "json":
            print(to_json(rows))
        else:
            table = [(r["topic"], r["partitions"], human_bytes(r["size_bytes"])) for r in rows]
            print(render_table(("TOPIC", "PARTITIONS", "SIZE"), table, right=("PARTITIONS", "SIZE")))
        return 0

    return run_admin(args, operation)


# --- describe -------------------------------------------------------------------------------------


async def describe_topics(admin: Admin, names: Sequence[str]) -> list[dict[str, Any]]:
    """Everything ``describe`` shows, as JSON-ready dicts."""
    metadata = await admin.cluster.refresh_metadata()
    if not names:
        names = sorted(n for n, info in metadata.topics.items() if not info.is_internal)
    missing = [n for n in names if n not in metadata.topics]
    if missing:
        raise CommandError(f"no such topic: {', '.join(missing)}", status=1)
    partitions = [TopicPartition(n, p) for n in names for p in sorted(metadata.topics[n].partitions)]
    earliest = await admin.earliest_offsets(partitions)
    latest = await admin.latest_offsets(partitions)
    sizes = await admin.log_dir_sizes(names)
    try:
        configs: dict[str, dict[str, ConfigEntry]] | None = await admin.describe_configs(ResourceType.TOPIC, names)
    except UnsupportedVersionError:
        configs = None  # a broker without DescribeConfigs
    described = []
    for name in names:
        info = metadata.topics[name]
        rows = []
        for p in sorted(info.partitions):
            tp = TopicPartition(name, p)
            rows.append(
                {
                    "partition": p,
                    "leader": info.partitions[p].leader,
                    "leader_epoch": info.partitions[p].leader_epoch,
                    "replicas": list(info.partitions[p].replicas),
                    "isr": list(info.partitions[p].isr),
                    "earliest_offset": earliest[tp],
                    "latest_offset": latest[tp],
                    "records": latest[tp] - earliest[tp],
                    "size_bytes": sizes.get(tp),
                }
            )
        topic_configs = None
        if configs is not None:
            topic_configs = {
                key: {"value": e.value, "source": _source(e)} for key, e in sorted(configs.get(name, {}).items())
            }
        described.append({"topic": name, "internal": info.is_internal, "partitions": rows, "configs": topic_configs})
    return described


def render_description(topic: dict[str, Any]) -> str:
    partitions = topic["partitions"]
    total = [r["size_bytes"] for r in partitions if r["size_bytes"] is not None]
    header = (
        f"Topic: {topic['topic']}  partitions: {len(partitions)}  records: {sum(r['records'] for r in partitions)}"
        f"  size: {human_bytes(sum(total) if total else None)}"
    )
    table = render_table(
        ("PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "EARLIEST", "LATEST", "RECORDS", "SIZE"),
        [
            (
                r["partition"],
                r["leader"],
                r["leader_epoch"],
                ",".join(map(str, r["replicas"])),
                ",".join(map(str, r["isr"])),
                r["earliest_offset"],
                r["latest_offset"],
                r["records"],
                human_bytes(r["size_bytes"]),
            )
            for r in partitions
        ],
        right=("PARTITION", "LEADER", "EPOCH", "EARLIEST", "LATEST", "RECORDS", "SIZE"),
    )
    if topic["configs"] is None:
        configs = "Configs: not reported by the broker"
    else:
        configs = "Configs:\n" + render_table(
            ("CONFIG", "VALUE", "SOURCE"), [(k, v["value"], v["source"]) for k, v in topic["configs"].items()]
        )
    return f"{header}\n{table}\n{configs}"


async def unhealthy_partitions(admin: Admin, names: Sequence[str], *, unavailable: bool) -> list[dict[str, Any]]:
    """Partitions under-replicated (ISR smaller than the replicas) or, with `unavailable`,
    without a live leader, as Kafka's kafka-topics --describe options select them."""
    metadata = await admin.cluster.refresh_metadata()
    chosen = names or sorted(metadata.topics)
    rows = []
    for name in chosen:
        info = metadata.topics.get(name)
        if info is None:
            raise CommandError(f"no such topic: {name}", status=1)
        for p, state in sorted(info.partitions.items()):
            bad = state.leader < 0 if unavailable else len(state.isr) < len(state.replicas)
            if bad:
                rows.append({"topic": name, "partition": p, "leader": state.leader, "leader_epoch": state.leader_epoch,
                             "replicas": list(state.replicas), "isr": list(state.isr)})  # fmt: skip
    return rows


def run_describe(args: argparse.Namespace) -> int:
    async def operation(admin: Admin) -> int:
        if args.under_replicated_partitions or args.unavailable_partitions:
            rows = await unhealthy_partitions(admin, args.topics, unavailable=args.unavailable_partitions)
            if args.output == "json":
                print(to_json(rows))
            else:
                print(render_table(
                    ("TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR"),
                    [(r["topic"], r["partition"], r["leader"], r["leader_epoch"], ",".join(map(str, r["replicas"])),
                      ",".join(map(str, r["isr"]))) for r in rows],
                ))  # fmt: skip
            return 1 if rows else 0
        described = await describe_topics(admin, args.topics)
        if args.output == "json":
            print(to_json(described))
        else:
            print("\n\n".join(render_description(t) for t in described))
        return 0

    return run_admin(args, operation)


def run_elect_leaders(args: argparse.Namespace) -> int:
    async def operation(admin: Admin) -> int:
        if args.partition is not None and args.topic is None:
            raise CommandError("--partition needs --topic")
        chosen: list[TopicPartition] | None = None
        if args.topic is not None:
            chosen = [TopicPartition(args.topic, args.partition)] if args.partition is not None else \
                await admin.partitions_of(args.topic)  # fmt: skip
        outcome = await admin.elect_leaders(chosen, timeout=args.timeout)
        rows = [
            {"topic": tp.topic, "partition": tp.partition, "result": code.name}
            for tp, code in sorted(outcome.items(), key=lambda item: (item[0].topic, item[0].partition))
        ]
        if args.output == "json":
            print(to_json(rows))
        else:
            table = [(r["topic"], r["partition"], r["result"]) for r in rows]
            print(render_table(("TOPIC", "PARTITION", "RESULT"), table))
        failed = [c for c in outcome.values() if c not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)]
        return 1 if failed else 0

    return run_admin(args, operation)


# --- create, delete, alter ----------------------------------------------------------------------------


def _report(args: argparse.Namespace, result: dict[str, Any], line: str) -> None:
    print(to_json(result) if args.output == "json" else line)


def run_create(args: argparse.Namespace) -> int:
    async def operation(admin: Admin) -> int:
        configs = parse_configs(args.config)
        await admin.create_topic(
            args.topic,
            args.partitions,
            configs,
            replication_factor=args.replication_factor,
            exist_ok=args.if_not_exists,
            timeout=args.timeout,
        )
        count = len((await admin.list_topics())[args.topic].partitions)
        _report(
            args,
            {"topic": args.topic, "created": True, "partitions": count, "configs": configs},
            f"created topic {args.topic} with {count} partitions",
        )
        return 0

    return run_admin(args, operation)


def run_delete(args: argparse.Namespace) -> int:
    async def operation(admin: Admin) -> int:
        await admin.delete_topics(args.topics, timeout=args.timeout)
        _report(args, {"deleted": args.topics}, "\n".join(f"deleted topic {t}" for t in args.topics))
        return 0

    return run_admin(args, operation)


def run_alter(args: argparse.Namespace) -> int:
    async def operation(admin: Admin) -> int:
        configs: dict[str, str | None] = dict(parse_configs(args.config))
        both = sorted(set(configs) & set(args.delete_config))
        if both:
            raise CommandError(f"both set and deleted: {', '.join(both)}")
        configs.update(dict.fromkeys(args.delete_config))
        if args.partitions is None and not configs:
            raise CommandError("nothing to change: give --partitions, --config or --delete-config")
        if args.topic not in await admin.list_topics(internal=True):
            raise CommandError(f"no such topic: {args.topic}", status=1)
        lines = []
        if args.partitions is not None:
            await admin.create_partitions({args.topic: args.partitions}, timeout=args.timeout)
            lines.append(f"topic {args.topic} now has {args.partitions} partitions")
        if configs:
            await admin.alter_topic_configs({args.topic: configs}, timeout=args.timeout)
            lines += [
                f"topic {args.topic}: {k} = {v}" if v is not None else f"topic {args.topic}: {k} reset to its default"
                for k, v in configs.items()
            ]
        _report(args, {"topic": args.topic, "partitions": args.partitions, "configs": configs}, "\n".join(lines))
        return 0

    return run_admin(args, operation)
