"""The errors only a consumer raises (the others are in ``errors.py``).

``poll`` raises a partition's error once it reaches it:
:class:`NoOffsetForPartitionError` (``auto_offset_reset="none"`` and nothing
committed), :class:`~client.errors.OffsetOutOfRangeError` (``"none"`` and the
position fell out of the log), :class:`~client.errors.MessageTooLargeError` (a
batch larger than the fetch limits). Each names its partition and stays until
the application seeks that partition, as in Kafka.
"""

from __future__ import annotations

from tributary.client.errors import KafkaError
from tributary.protocol.error_codes import ErrorCode


class NoOffsetForPartitionError(KafkaError, code=ErrorCode.OFFSET_OUT_OF_RANGE):
    """A partition has no committed offset and ``auto_offset_reset`` is "none"."""


class CommitFailedError(KafkaError, code=ErrorCode.ILLEGAL_GENERATION):
    """A commit the group refused because this member is no longer part of the
    generation it committed for (the group rebalanced, or the member was dropped);
    the partitions may already belong to another member."""


class GroupMembershipError(KafkaError):
    """Group membership failed for good (FENCED_INSTANCE_ID,
    INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, ...); ``poll`` raises it."""


class IllegalStateError(RuntimeError):
    """A call the consumer's state does not allow: ``subscribe`` after ``assign``,
    seeking a partition that is not assigned, using a closed consumer."""


__all__ = ["CommitFailedError", "GroupMembershipError", "IllegalStateError", "NoOffsetForPartitionError"]
