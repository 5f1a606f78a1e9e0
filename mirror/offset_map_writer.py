"""Writing offset-translation entries into the aggregate's offsets topic.

Entries go through an ordinary (idempotent, acks=all) producer, which batches
them. :meth:`MappingWriter.flush` returns only once every entry added before
it is acknowledged, and raises if any failed: a checkpoint is committed only
after the entries of every batch it covers are durable, so translation never
lacks an entry for data the mirror considers done.
"""

from __future__ import annotations

from tributary.client.producer.accumulator import RecordHandle
from tributary.client.producer.producer import Producer
from tributary.mirror.offset_map import MappingEntry


class MappingWriter:
    def __init__(self, producer: Producer, topic: str) -> None:
        self._producer = producer
        self.topic = topic
        self._pending: list[RecordHandle] = []

    async def add(self, entry: MappingEntry) -> None:
        self._pending.append(await self._producer.enqueue(self.topic, entry.value(), key=entry.key()))

    async def flush(self) -> None:
        pending, self._pending = self._pending, []
        await self._producer.flush()
        for handle in pending:
            await handle.wait()


__all__ = ["MappingWriter"]
