"""DeleteRecords (KIP-107) as an admin operation: move partitions' log start offsets forward.

Each partition's request goes to its leader; a retriable refusal (the leader moved, a replica
was slow to follow) is asked again after a backoff until the deadline. The answer per partition
is its new low watermark: the offset from which the partition is readable on every live replica.
"""

from __future__ import annotations

from collections.abc import Mapping

import trio

from tributary.client.errors import KafkaError, error_for
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.messages import DeleteRecordsRequest, DeleteRecordsResponse

#: DeleteRecords' offset for "everything below the high watermark".
HIGH_WATERMARK = -1


def delete_records_request(offsets: Mapping[TopicPartition, int], timeout_ms: int) -> DeleteRecordsRequest:
    by_topic: dict[str, list[DeleteRecordsRequest.DeleteRecordsPartition]] = {}
    for tp, offset in offsets.items():
        by_topic.setdefault(tp.topic, []).append(DeleteRecordsRequest.DeleteRecordsPartition(tp.partition, offset))
    return DeleteRecordsRequest(
        topics=[DeleteRecordsRequest.DeleteRecordsTopic(name, partitions) for name, partitions in by_topic.items()],
        timeout_ms=timeout_ms,
    )


async def _once(
    cluster: Cluster, offsets: Mapping[TopicPartition, int], timeout_ms: int
) -> dict[TopicPartition, int | KafkaError]:
    outcome: dict[TopicPartition, int | KafkaError] = {}
    by_leader: dict[int, dict[TopicPartition, int]] = {}
    for tp, offset in offsets.items():
        try:
            by_leader.setdefault(await cluster.leader_for(tp.topic, tp.partition), {})[tp] = offset
        except KafkaError as exc:
            outcome[tp] = exc

    async def ask(leader: int, subset: dict[TopicPartition, int]) -> None:
        try:
            response: DeleteRecordsResponse = await cluster.send(leader, delete_records_request(subset, timeout_ms))
        except KafkaError as exc:
            outcome.update(dict.fromkeys(subset, exc))
            return
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if tp not in subset:
                    continue
                outcome[tp] = p.low_watermark if not p.error_code else error_for(
                    p.error_code, topic=tp.topic, partition=tp.partition, broker=leader, context="delete records"
                )  # fmt: skip

    async with trio.open_nursery() as nursery:
        for leader, subset in by_leader.items():
            nursery.start_soon(ask, leader, subset)
    for tp in offsets:  # a leader that left a partition out: an unknown server error, retried no more
        outcome.setdefault(tp, error_for(-1, topic=tp.topic, partition=tp.partition, context="delete records"))
    return outcome


async def delete_records(
    cluster: Cluster, offsets: Mapping[TopicPartition, int], deadline: float
) -> dict[TopicPartition, int]:
    """Each partition's new low watermark; raises the first error that is not retriable, or a
    retriable one when ``deadline`` (trio time) leaves no time for another round."""
    remaining = dict(offsets)
    results: dict[TopicPartition, int] = {}
    while remaining:
        timeout_ms = max(int((deadline - trio.current_time()) * 1000), 1)
        retry: KafkaError | None = None
        for tp, result in (await _once(cluster, remaining, timeout_ms)).items():
            if not isinstance(result, KafkaError):
                results[tp] = result
                del remaining[tp]
            elif result.retriable:
                retry = retry or result
                cluster.note_error(result)
            else:
                raise result
        if retry is not None:
            if trio.current_time() + cluster.config.retry_backoff > deadline:
                raise retry
            await trio.sleep(cluster.config.retry_backoff)
            await cluster.refresh_metadata()
    return results
