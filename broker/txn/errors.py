"""Error codes a transactional request's version can carry."""

from __future__ import annotations

from tributary.protocol.error_codes import ErrorCode


def fenced_for(error: ErrorCode | int, version: int, fenced_since: int) -> ErrorCode:
    """PRODUCER_FENCED for clients that know it, else INVALID_PRODUCER_EPOCH (which they treat
    the same way), as Kafka answers versions older than the one that introduced it."""
    code = ErrorCode(error)
    if code == ErrorCode.PRODUCER_FENCED and version < fenced_since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code
