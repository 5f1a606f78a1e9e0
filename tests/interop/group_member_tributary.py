"""One member of a consumer group using Tributary's own Consumer, with the journal of
``group_member.py`` (same arguments, same lines), so the two clients can be compared.

    python -m tests.interop.group_member_tributary --bootstrap B --group G --topic T \\
        --protocol consumer|classic --journal FILE [--work-ms N]

Auto-commit commits what the application has processed, the positions as of its latest
poll; every record a poll returned is journalled before the next poll, so nothing
committed is missing from the journal.
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from typing import Any

import trio

from tributary.client.consumer.consumer import Consumer
from tributary.client.wire.metadata import TopicPartition


async def run(args: argparse.Namespace) -> None:
    journal = open(args.journal, "a", buffering=1)  # noqa: SIM115 (line writes, open until the end)

    def write(ev: str, **fields: Any) -> None:
        journal.write(json.dumps({"t": time.time(), "ev": ev, **fields}) + "\n")

    def parts(partitions: list[TopicPartition]) -> list[int]:
        return sorted(tp.partition for tp in partitions)

    settings: dict[str, Any] = {
        "group_protocol": args.protocol,
        "auto_offset_reset": "earliest",
        "auto_commit_interval_ms": 200,
        "fetch_max_wait_ms": 50,
    }
    if args.protocol == "classic":
        settings.update({"session_timeout_ms": 6000, "heartbeat_interval_ms": 500})
    with trio.open_signal_receiver(signal.SIGTERM) as signals:
        async with Consumer(args.bootstrap, args.group, **settings) as consumer:
            consumer.subscribe(
                [args.topic],
                on_assign=lambda ps: write("assign", parts=parts(ps)),
                on_revoke=lambda ps: write("revoke", parts=parts(ps)),
                on_lost=lambda ps: write("lost", parts=parts(ps)),
            )
            write("started")
            async with trio.open_nursery() as nursery:

                async def stop_on_signal() -> None:
                    async for _ in signals:
                        nursery.cancel_scope.cancel()
                        return

                nursery.start_soon(stop_on_signal)
                while True:
                    records = await consumer.poll(0.1)
                    for record in records:
                        write("msg", p=record.partition, o=record.offset)
                    if records and args.work_ms:
                        await trio.sleep(args.work_ms / 1000)
    write("closed")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--protocol", choices=("consumer", "classic"), required=True)
    parser.add_argument("--journal", required=True)
    parser.add_argument("--work-ms", type=int, default=0)
    parser.add_argument("--debug", default="")
    trio.run(run, parser.parse_args())


if __name__ == "__main__":
    main()
