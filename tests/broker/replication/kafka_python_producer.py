"""kafka-python producing numbered records (acks=all, idempotent) until SIGTERM, then flushing;
one line per answer on stdout: ``ack SEQUENCE PARTITION OFFSET`` or ``fail SEQUENCE REASON``,
and ``sent COUNT`` last. Run by background.BackgroundKafkaPythonProducer in its own process."""

from __future__ import annotations

import signal
import sys
import threading
import time

from kafka import KafkaProducer

from tributary.testing.history import sequence_value


def main(bootstrap: str, topic: str) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    lock = threading.Lock()

    def out(line: str) -> None:
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    producer = KafkaProducer(
        bootstrap_servers=bootstrap.split(","), acks="all", enable_idempotence=True, linger_ms=2,
        retries=2**31 - 1, delivery_timeout_ms=120_000, request_timeout_ms=10_000, metadata_max_age_ms=1000,
    )  # fmt: skip
    sent = 0
    while not stop.is_set():
        future = producer.send(topic, sequence_value(sent))
        future.add_callback(lambda md, s=sent: out(f"ack {s} {md.partition} {md.offset}"))
        future.add_errback(lambda exc, s=sent: out(f"fail {s} {exc!r}"))
        sent += 1
        time.sleep(0.002)
    producer.flush(120)
    producer.close(10)
    out(f"sent {sent}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
