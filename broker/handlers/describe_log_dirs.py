"""DescribeLogDirs: the size on disk of the partition logs this broker holds.

A broker has one data directory, so the answer has one log dir. ``topics``
null asks for every log; otherwise only the named partitions held here are
listed. ``offset_lag`` (how far a future replica trails) is always 0: there
are no future replicas. From v4 the log dir carries the size of its file
system and the space left on it (KIP-827). Describe on the Cluster is needed:
without it the answer lists no log dir (and, from v3, says
CLUSTER_AUTHORIZATION_FAILED), as Kafka's does.
"""

from __future__ import annotations

import os
from pathlib import Path

from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclOperation
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import DescribeLogDirsRequest, DescribeLogDirsResponse

R = DescribeLogDirsResponse


def _space(directory: Path) -> tuple[int, int]:
    """(total, usable) bytes of the file system under ``directory``; (-1, -1) if unknown."""
    try:
        stat = os.statvfs(directory)
    except OSError:
        return -1, -1
    return stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize


async def handle(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return R(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[])
    sizes = ctx.broker.logs.sizes()
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    by_topic: dict[str, list[R.DescribeLogDirsPartition]] = {}
    for tp, size in sorted(sizes.items()):
        if wanted is not None and (tp.topic, tp.partition) not in wanted:
            continue
        by_topic.setdefault(tp.topic, []).append(
            R.DescribeLogDirsPartition(partition_index=tp.partition, partition_size=size)
        )
    total, usable = _space(ctx.broker.logs.data_dir)
    return R(
        results=[
            R.DescribeLogDirsResult(
                error_code=ErrorCode.NONE,
                log_dir=str(ctx.broker.logs.data_dir),
                topics=[R.DescribeLogDirsTopic(name=name, partitions=ps) for name, ps in by_topic.items()],
                total_bytes=total,
                usable_bytes=usable,
            )
        ]
    )
