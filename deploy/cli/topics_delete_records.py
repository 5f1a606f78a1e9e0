"""``tributary topics delete-records``: delete every record below given offsets (KIP-107), with
Kafka's offset JSON (kafka-delete-records: the same option and file).

    tributary topics --bootstrap B delete-records --offset-json-file F
    tributary topics --bootstrap B delete-records --topic T --partition N --offset O

The file is ``{"version": 1, "partitions": [{"topic": T, "partition": P, "offset": O}, ...]}``;
an offset of -1 deletes everything below the partition's high watermark. Each partition's
leader moves its log start offset there and answers once every live replica has; the table
shows each partition's new low watermark. The records are gone for every consumer; segments
wholly below are deleted from disk at once.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tributary.client.admin.admin import Admin
from tributary.client.wire.metadata import TopicPartition
from tributary.deploy.cli.admin_options import CommandError, run_admin
from tributary.deploy.tables import render_table, to_json

#: The only version of Kafka's offset JSON.
FILE_VERSION = 1


def register_action(actions: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = actions.add_parser(
        "delete-records",
        help="delete the records below offsets (kafka-delete-records, Kafka's offset JSON)",
    )
    parser.add_argument(
        "--offset-json-file",
        type=Path,
        metavar="FILE",
        help='{"version": 1, "partitions": [{"topic": T, "partition": P, "offset": O}, ...]} (-1: high watermark)',
    )
    parser.add_argument("--topic", metavar="TOPIC", help="instead of a file: one partition of this topic")
    parser.add_argument("--partition", type=int, metavar="N", help="with --topic")
    parser.add_argument("--offset", type=int, metavar="O", help="with --topic: delete below it (-1: high watermark)")
    parser.set_defaults(func=run_delete_records)
    return parser


def parse_offsets(text: str) -> dict[TopicPartition, int]:
    """Kafka's offset JSON, checked for shape (a partition named twice is an error, as there)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"the offset file is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CommandError("the offset file must hold a JSON object")
    if value.get("version", FILE_VERSION) != FILE_VERSION:
        raise CommandError(f"the offset file has version {value.get('version')!r}; only {FILE_VERSION} is known")
    entries = value.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise CommandError('the offset file needs a non-empty "partitions" list')
    offsets: dict[TopicPartition, int] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise CommandError(f"not a partition entry: {entry!r}")
        topic, partition, offset = entry.get("topic"), entry.get("partition"), entry.get("offset")
        if (
            not isinstance(topic, str)
            or not isinstance(partition, int)
            or not isinstance(offset, int)
            or any(isinstance(v, bool) for v in (partition, offset))
        ):
            raise CommandError(f"a partition entry needs a topic, a partition and an offset: {entry!r}")
        tp = TopicPartition(topic, partition)
        if tp in offsets:
            raise CommandError(f"the offset file names {topic}-{partition} twice")
        if offset < -1:
            raise CommandError(f"{topic}-{partition}: offset {offset} is neither an offset nor -1")
        offsets[tp] = offset
    return offsets


def _requested(args: argparse.Namespace) -> dict[TopicPartition, int]:
    if args.offset_json_file is not None:
        if args.topic is not None:
            raise CommandError("give --offset-json-file or --topic, not both")
        try:
            return parse_offsets(args.offset_json_file.read_text())
        except OSError as exc:
            raise CommandError(f"cannot read {args.offset_json_file}: {exc.strerror}") from None
    if args.topic is None or args.partition is None or args.offset is None:
        raise CommandError("give --offset-json-file, or --topic with --partition and --offset")
    if args.offset < -1:
        raise CommandError(f"--offset {args.offset} is neither an offset nor -1")
    return {TopicPartition(args.topic, args.partition): args.offset}


def run_delete_records(args: argparse.Namespace) -> int:
    async def operation(admin: Admin) -> int:
        offsets = _requested(args)
        low = await admin.delete_records(offsets, timeout=args.timeout)
        rows = [
            {"topic": tp.topic, "partition": tp.partition, "low_watermark": low[tp]}
            for tp in sorted(low, key=lambda tp: (tp.topic, tp.partition))
        ]
        if args.output == "json":
            print(to_json(rows))
        else:
            print(render_table(("TOPIC", "PARTITION", "LOW WATERMARK"), [tuple(r.values()) for r in rows],
                               right=("PARTITION", "LOW WATERMARK")))  # fmt: skip
        return 0

    return run_admin(args, operation)
