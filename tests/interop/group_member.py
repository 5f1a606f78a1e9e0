"""One member of a consumer group, in a process of its own so that ``kill -9`` is real: a
confluent-kafka (librdkafka) consumer that writes a journal of what happens to it.

    python -m tests.interop.group_member --bootstrap B --group G --topic T \\
        --protocol consumer|classic --journal FILE [--work-ms N]

Each journal line is JSON with the wall-clock time ``t`` (comparable across the processes
of one machine) and ``ev``: ``assign``/``revoke``/``lost`` with ``parts`` (from the
rebalance callbacks: ownership starts when ``assign`` is written and ends when ``revoke``
is), ``msg`` with ``p`` and ``o`` (a record consumed), ``closed``. The journal is line
buffered and a record's offset is stored for auto-commit only after its line is written, so
nothing committed is missing from the journal, even after ``kill -9``. SIGTERM closes the
consumer cleanly (revoking, committing, leaving the group).
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--protocol", choices=("consumer", "classic"), required=True)
    parser.add_argument("--journal", required=True)
    parser.add_argument("--work-ms", type=int, default=0, help="time spent on each batch polled (processing)")
    parser.add_argument("--debug", default="", help="librdkafka debug contexts (to the member's log)")
    args = parser.parse_args()

    journal = open(args.journal, "a", buffering=1)  # noqa: SIM115 (open until the process ends)

    def write(ev: str, **fields: Any) -> None:
        journal.write(json.dumps({"t": time.time(), "ev": ev, **fields}) + "\n")

    def parts(partitions: list[TopicPartition]) -> list[int]:
        return sorted(p.partition for p in partitions)

    settings: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "group.protocol": args.protocol,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 200,
        "enable.auto.offset.store": False,
        "fetch.wait.max.ms": 50,
        "fetch.queue.backoff.ms": 0,
        # librdkafka backs a partition's fetching off by this much when it drops a fetch answer
        # it no longer wants, as after pausing and resuming it (which it does to every
        # partition of a member whose assignment changes): 500 ms by default.
        "fetch.error.backoff.ms": 20,
    }
    if args.debug:
        settings["debug"] = args.debug
    if args.protocol == "classic":
        # librdkafka's defaults otherwise: the eager "range,roundrobin" assignors.
        settings.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    consumer = Consumer(settings)
    stop = False

    def on_signal(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    consumer.subscribe(
        [args.topic],
        on_assign=lambda _, ps: write("assign", parts=parts(ps)),
        on_revoke=lambda _, ps: write("revoke", parts=parts(ps)),
        on_lost=lambda _, ps: write("lost", parts=parts(ps)),
    )
    write("started")
    while not stop:
        batch = consumer.consume(500, 0.1)
        for message in batch:
            if message.error() is not None:
                continue
            write("msg", p=message.partition(), o=message.offset())
            try:
                consumer.store_offsets(message)
            except KafkaException as exc:  # the partition went meanwhile: the next owner reads it again
                write("store_failed", p=message.partition(), o=message.offset(), error=str(exc))
        if batch and args.work_ms:
            time.sleep(args.work_ms / 1000)  # the application working on what it got
    consumer.close()
    write("closed")


if __name__ == "__main__":
    main()
