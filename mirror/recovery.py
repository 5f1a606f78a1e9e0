"""Recovery: where a partition's copy resumes, exactly, after any interruption.

The mirror may die (or lose a produce's answer) after the aggregate appended
a batch and before the progress was recorded. So progress is never trusted
alone: from the last checkpoint ``(source S, aggregate A)`` the aggregate
partition is read from ``A`` to its end, and each batch found there is matched
against the next batch the mirror would copy from the source at ``S`` (the
same selection: no transaction markers, no aborted transactions). A batch
that matches (same span, count, first timestamp, byte-identical compressed
records) was copied already: both positions move past it and its translation
entry is written again. When the aggregate partition ends, the positions are
where copying resumes; nothing is copied twice and nothing is skipped.

Anything the source cannot explain (a foreign write into the aggregate topic,
or a source that lost the data) stops that partition with
:class:`RecoveryError` rather than guessing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable

from tributary.client.admin.admin import Admin
from tributary.client.errors import OffsetOutOfRangeError
from tributary.client.raw.batches import READ_COMMITTED, RawBatches
from tributary.client.raw.client import RawClient
from tributary.client.wire.metadata import TopicPartition
from tributary.mirror.batches import SourceBatch, copyable, for_target, prepare, same_batch
from tributary.mirror.checkpoint import Checkpoint
from tributary.protocol.records import BatchHeader

log = logging.getLogger("tributary.mirror")

#: Bytes per fetch while reconciling (a batch larger than this still comes whole, KIP-74).
RECOVERY_FETCH_BYTES = 4 * 1024 * 1024
#: A token long poll: some brokers (Tansu 0.6) leave a partition out of a fetch that may
#: not wait at all, which would look like the end of the source.
RECOVERY_MAX_WAIT_MS = 10


class RecoveryError(Exception):
    """The aggregate partition holds data the source does not explain."""


async def _source_batches(
    source: RawClient, tp: TopicPartition, start: int
) -> AsyncGenerator[tuple[BatchHeader, bytes], None]:
    """The batches the mirror copies from ``start`` on, until the source's end."""
    position = start
    while True:
        fetched: RawBatches = await source.fetch_partition(
            tp.topic, tp.partition, position, max_wait_ms=RECOVERY_MAX_WAIT_MS, max_bytes=RECOVERY_FETCH_BYTES,
            isolation_level=READ_COMMITTED,
        )  # fmt: skip
        if not fetched.batches:
            return
        for header, data in copyable(fetched, position):
            yield header, data
        position = fetched.next_offset


async def reconcile(
    *,
    source: RawClient,
    target: RawClient,
    target_admin: Admin,
    source_tp: TopicPartition,
    target_tp: TopicPartition,
    checkpoint: Checkpoint,
    matched: Callable[[SourceBatch, BatchHeader], Awaitable[None]],
) -> Checkpoint:
    """Move ``checkpoint`` past every batch the aggregate already holds beyond it.
    ``matched(source_batch, aggregate_header)`` is awaited for each (to re-record translation)."""
    end = (await target_admin.latest_offsets([target_tp]))[target_tp]
    if end < checkpoint.aggregate:
        raise RecoveryError(
            f"{target_tp} ends at {end} but the checkpoint says {checkpoint.aggregate} was acknowledged: "
            "the aggregate lost acknowledged data"
        )
    if end == checkpoint.aggregate:
        return checkpoint
    s, a = checkpoint.source, checkpoint.aggregate
    found = 0
    try:
        async with contextlib.aclosing(_source_batches(source, source_tp, checkpoint.source)) as source_iter:
            while a < end:
                fetched = await target.fetch_partition(
                    target_tp.topic, target_tp.partition, a, max_wait_ms=0, max_bytes=RECOVERY_FETCH_BYTES
                )
                if not fetched.batches:
                    raise RecoveryError(f"{target_tp}: nothing to read at {a} although the partition ends at {end}")
                for agg_header, agg_data in fetched.batch_bytes():
                    if agg_header.next_offset <= a:
                        continue
                    try:
                        src_header, src_data = await anext(source_iter)
                    except StopAsyncIteration:
                        raise RecoveryError(
                            f"{target_tp} holds a batch at {agg_header.base_offset} beyond what {source_tp} has "
                            f"from offset {s}: the aggregate topic has data the mirror did not copy"
                        ) from None
                    prepared = prepare(src_header, src_data)
                    produced = for_target(prepared.header, prepared.data)
                    if not same_batch(agg_header, agg_data, prepared.header, produced, renumbered=prepared.renumbered):
                        raise RecoveryError(
                            f"{target_tp} at offset {agg_header.base_offset} is not the copy of {source_tp} batch "
                            f"at {src_header.base_offset}: the aggregate topic has data the mirror did not copy"
                        )
                    await matched(prepared, agg_header)
                    s, a = src_header.next_offset, agg_header.next_offset
                    found += 1
    except OffsetOutOfRangeError as exc:
        raise RecoveryError(f"{source_tp} no longer holds offset {s} needed to reconcile: {exc}") from None
    log.info(
        "event=reconciled source=%s target=%s batches=%d source_offset=%d aggregate_offset=%d",
        source_tp, target_tp, found, s, a,
    )  # fmt: skip
    return Checkpoint(s, a)


__all__ = ["RecoveryError", "reconcile"]
