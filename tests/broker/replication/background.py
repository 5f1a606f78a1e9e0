"""An acks=all, idempotent confluent-kafka producer streaming numbered records in a thread,
noting every acknowledgement in a :class:`History` for the checker."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType

from confluent_kafka import KafkaError, Producer

from tributary.testing.history import History


class BackgroundProducer:
    """``settings``: more librdkafka settings (security, for one)."""

    def __init__(self, bootstrap: str, topic: str, settings: dict[str, str] | None = None) -> None:
        self.topic = topic
        self.history = History()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
             "linger.ms": 2, "message.timeout.ms": 120_000, "topic.metadata.refresh.interval.ms": 1000,
             **(settings or {})}
        )  # fmt: skip
        self._thread = threading.Thread(target=self._produce)

    def acknowledged(self) -> int:
        with self._lock:
            return len(self.history.acknowledged)

    def _produce(self) -> None:
        history = self.history
        while not self._stop.is_set():
            with self._lock:
                sequence, value = history.next_value()

            def delivered(err: KafkaError | None, msg: object, sequence: int = sequence) -> None:
                with self._lock:
                    if err is None:
                        history.acknowledge(sequence, msg.partition(), msg.offset())  # type: ignore[attr-defined]
                    else:
                        history.fail(sequence, str(err))

            while True:
                try:
                    self.producer.produce(self.topic, value, on_delivery=delivered)
                    break
                except BufferError:
                    self.producer.poll(0.05)
            self.producer.poll(0)
            time.sleep(0.001)

    def __enter__(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        if kind is None:
            assert self.producer.flush(60) == 0, "records still unanswered a minute after the last was produced"


class BackgroundKafkaPythonProducer:
    """The same with kafka-python (acks=all, idempotent), on a topic of its own, in a process of
    its own (kafka_python_producer.py): it reports each answer on a line, read into a History.
    (kafka-python leaves the sockets of refused connections to the garbage collector, which this
    suite's warning filter would blame on whatever test runs next.)"""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.history = History()
        self._lock = threading.Lock()
        script = Path(__file__).with_name("kafka_python_producer.py")
        self._proc = subprocess.Popen(
            [sys.executable, str(script), bootstrap, topic], stdout=subprocess.PIPE, text=True
        )
        self._reader = threading.Thread(target=self._read)

    def acknowledged(self) -> int:
        with self._lock:
            return len(self.history.acknowledged)

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            kind, _, rest = line.rstrip("\n").partition(" ")
            with self._lock:
                if kind == "ack":
                    sequence, partition, offset = (int(x) for x in rest.split())
                    self.history.acknowledge(sequence, partition, offset)
                elif kind == "fail":
                    sequence_text, _, reason = rest.partition(" ")
                    self.history.fail(int(sequence_text), reason)
                elif kind == "sent":
                    self.history.sent = int(rest)

    def __enter__(self) -> BackgroundKafkaPythonProducer:
        self._reader.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._proc.send_signal(signal.SIGTERM)  # stop sending, flush, report, exit
        try:
            code = self._proc.wait(timeout=180)
        finally:
            if self._proc.poll() is None:
                self._proc.kill()
            self._reader.join(10)
            assert self._proc.stdout is not None
            self._proc.stdout.close()
        if kind is None:
            assert code == 0, f"the kafka-python producer exited with {code}"
