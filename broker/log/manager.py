"""All partition logs of one data directory.

The data directory holds one ``<topic>-<partition>/`` directory per log, Kafka's
``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint`` (high
watermarks), ``log-start-offset-checkpoint`` (where DeleteRecords left each log
starting, when that is inside its first segment) and, between a clean shutdown and
the next start, the ``.kafka_cleanshutdown`` marker that lets that start skip recovery.

The broker drives it: :meth:`LogManager.flush_due` says which logs to flush
(it runs ``log.flush`` in a worker thread), :meth:`checkpoint_recovery_points`
records how far each log is on disk, :meth:`apply_retention` deletes old
segments. Like the logs, the manager belongs to one thread; the constructor
and :meth:`close` may run in a worker thread while nothing else uses it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import resource
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

from tributary.broker.log.checkpoint import RECOVERY_POINT_CHECKPOINT, read_checkpoint, write_checkpoint
from tributary.broker.log.config import LogConfig
from tributary.broker.log.errors import CorruptLogError
from tributary.broker.log.files import OPEN_FLAGS, atomic_write, fsync_dir
from tributary.broker.log.log import PartitionLog

log = logging.getLogger(__name__)

#: Kafka's file of high watermarks, one per data directory: where a replica's committed data
#: ended when it last checkpointed (a follower that restarts truncates no lower than this).
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
#: Kafka's file of log start offsets, one per data directory: DeleteRecords moves a log's start
#: into its first segment, which the segment files alone cannot tell after a restart.
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
# Kafka's legal topic names; anything else in the data directory is not a log.
_PARTITION_DIR = re.compile(r"^([a-zA-Z0-9._-]{1,249})-(0|[1-9][0-9]{0,9})$")

TopicOverrides = Mapping[str, str | int]


#: In a partition directory: the log is offline, and why (JSON); an operator removes it once
#: the segment is repaired.
OFFLINE_MARKER = "tributary-offline.json"


def _check_not_offline(directory: Path) -> None:
    """Raises the recorded :class:`CorruptLogError` of a log taken offline before."""
    try:
        details = json.loads((directory / OFFLINE_MARKER).read_bytes())
    except FileNotFoundError:
        return
    except ValueError:
        details = {"path": str(directory), "position": -1, "offset": -1, "reason": "unreadable offline marker"}
    raise CorruptLogError(**details)


#: The group and transaction coordinators' topics (named here too: the log package knows
#: nothing of coordinators): their logs are never closed to make room.
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
COORDINATOR_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})
#: File descriptors left for sockets (clients, ZooKeeper, metrics) when ``max_open`` is derived.
FD_RESERVE = 1024
#: Descriptors an open log holds: its active segment's log, offset and time index files.
FDS_PER_LOG = 3


def default_max_open_logs() -> int:
    """As many logs as the process's file descriptor limit allows with room left for
    sockets: a broker whose logs took every descriptor would lose ZooKeeper and its clients."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 100_000
    return max(16, (soft - min(FD_RESERVE, soft // 2)) // FDS_PER_LOG)


def _read_or_empty(path: Path, consequence: str) -> dict[tuple[str, int], int]:
    try:
        return read_checkpoint(path)
    except (ValueError, UnicodeDecodeError) as exc:
        log.warning("%s is unreadable (%s): %s", path, exc, consequence)
        return {}


class TopicPartition(NamedTuple):
    topic: str
    partition: int


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> TopicPartition | None:
    match = _PARTITION_DIR.match(name)
    return TopicPartition(match.group(1), int(match.group(2))) if match else None


class LogManager:
    """Opens every log in ``data_dir`` (recovering them after a crash)."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        config: LogConfig,
        *,
        topic_configs: Mapping[str, TopicOverrides] | None = None,
        now_ms: int | None = None,
        max_open: int | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.default_config = config
        self._topic_overrides: dict[str, TopicOverrides] = dict(topic_configs or {})
        # Open logs, least recently used first: each holds three file descriptors or more,
        # so at most ``max_open`` stay open; the others are closed (cleanly) and opened
        # again when a request needs them. Their recovery points wait in ``_closed``.
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._closed_logs: dict[TopicPartition, int] = {}
        self.max_open = default_max_open_logs() if max_open is None else max_open
        self._start_clean = True
        self._now_ms = now_ms
        #: Partitions whose flushed data does not read back: never opened, never written,
        #: answered KAFKA_STORAGE_ERROR until an operator repairs or deletes them.
        self.offline: dict[TopicPartition, CorruptLogError] = {}
        self._offline_points: dict[TopicPartition, int] = {}
        self._last_checkpoint: dict[tuple[str, int], int] | None = None
        self._last_hw_checkpoint: dict[tuple[str, int], int] | None = None
        self._last_start_checkpoint: dict[tuple[str, int], int] | None = None
        self._closed = False
        self._on_flush: Callable[[float], None] | None = None
        self.data_dir.mkdir(parents=True, exist_ok=True)

        marker = self.data_dir / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        checkpoint_path = self.data_dir / RECOVERY_POINT_CHECKPOINT
        try:
            recovery_points = read_checkpoint(checkpoint_path)
        except (ValueError, UnicodeDecodeError) as exc:
            # Recovering every segment is slow but safe.
            log.warning("%s is unreadable (%s): recovering every log from its start", checkpoint_path, exc)
            recovery_points = {}
        # High watermarks and log start offsets of the logs that are not open (all, until they
        # are opened). An unreadable log start checkpoint may serve records DeleteRecords
        # removed again, never lose any.
        self._high_watermarks = _read_or_empty(self.data_dir / HIGH_WATERMARK_CHECKPOINT, "high watermarks start at 0")
        self._log_starts = _read_or_empty(
            self.data_dir / LOG_START_OFFSET_CHECKPOINT, "logs start at their first segment"
        )
        try:
            for entry in sorted(os.scandir(self.data_dir), key=lambda e: e.name):
                tp = parse_partition_dir_name(entry.name)
                if tp is None or not entry.is_dir():
                    continue
                # Every log is opened (and recovered, after a crash) now, so damage shows at
                # start; those past ``max_open`` are closed again as the next ones open.
                self._closed_logs[tp] = recovery_points.get(tp, 0)
                self._start_clean = clean
                try:
                    self._open(tp)
                except CorruptLogError as exc:
                    # Offline, files untouched: the other partitions start as usual.
                    self._set_offline(tp, exc, self._closed_logs.pop(tp))
        except BaseException:
            for partition_log in self._logs.values():
                partition_log.close()
            raise
        # Logs closed from here on were closed cleanly (flushed), whatever this start was.
        self._start_clean = True
        if clean:
            # From here on a crash must not pass for a clean shutdown.
            marker.unlink()
            fsync_dir(self.data_dir)
        log.info(
            "opened %d logs in %s (%s start), %d kept open (at most %d)",
            len(self._logs) + len(self._closed_logs), self.data_dir, "clean" if clean else "recovered",
            len(self._logs), self.max_open,
        )  # fmt: skip

    def _config_for(self, topic: str) -> LogConfig:
        overrides = self._topic_overrides.get(topic)
        return self.default_config.with_overrides(overrides) if overrides else self.default_config

    @property
    def on_flush(self) -> Callable[[float], None] | None:
        return self._on_flush

    @on_flush.setter
    def on_flush(self, observer: Callable[[float], None] | None) -> None:
        """Hands every log, present and future, the flush-latency observer
        (see :attr:`PartitionLog.on_flush`)."""
        self._on_flush = observer
        for partition_log in self._logs.values():
            partition_log.on_flush = observer

    # --- partitions -------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get(TopicPartition(topic, partition))

    def get_or_create(self, topic: str, partition: int, overrides: TopicOverrides | None = None) -> PartitionLog:
        """The log, opened if closed, created if new. ``overrides`` (Kafka names, as the
        topic's config in ZooKeeper) replace the topic's previous ones when given."""
        tp = TopicPartition(topic, partition)
        if parse_partition_dir_name(partition_dir_name(topic, partition)) != tp:
            raise ValueError(f"illegal topic name or partition: {topic!r} {partition}")
        if overrides is not None:
            self.set_topic_overrides(topic, overrides)
        existing = self._logs.pop(tp, None)
        if existing is not None:
            self._logs[tp] = existing  # now the most recently used
            return existing
        if tp in self.offline:
            raise self.offline[tp]
        if tp in self._closed_logs:
            return self._open(tp)
        self._closed_logs[tp] = 0
        try:
            created = self._open(tp)
        except BaseException:
            self._closed_logs.pop(tp, None)
            raise
        fsync_dir(self.data_dir)  # the new directory; the log is open and listed either way
        return created

    def set_topic_overrides(self, topic: str, overrides: TopicOverrides) -> None:
        """A topic's config changed (or is first known): its open logs take it now, its
        closed ones when they open."""
        if self._topic_overrides.get(topic) == overrides:
            return
        self._topic_overrides[topic] = dict(overrides)
        config = self._config_for(topic)
        for other, partition_log in self._logs.items():
            if other.topic == topic:
                partition_log.config = config

    def _open(self, tp: TopicPartition) -> PartitionLog:
        """Opens a log listed in ``_closed_logs`` (new ones with recovery point 0), closing the
        least recently used open ones first if ``max_open`` are open."""
        while len(self._logs) >= self.max_open and self._close_one():
            pass
        directory = self.data_dir / partition_dir_name(tp.topic, tp.partition)
        _check_not_offline(directory)
        opened = PartitionLog.open(
            directory,
            self._config_for(tp.topic),
            self._closed_logs[tp],
            clean_shutdown=self._start_clean,
            now_ms=self._now_ms,
            log_start_offset=self._log_starts.pop((tp.topic, tp.partition), 0),
        )
        opened.on_flush = self._on_flush
        opened.high_watermark = self._high_watermarks.pop((tp.topic, tp.partition), 0)
        del self._closed_logs[tp]
        self._logs[tp] = opened
        return opened

    def _close_one(self) -> bool:
        """Closes the least recently used log that may close; False if none may. The
        coordinator's ``__consumer_offsets`` logs stay open: it writes them from its own state."""
        for tp, partition_log in self._logs.items():
            if tp.topic in COORDINATOR_TOPICS:
                continue
            del self._logs[tp]
            self._high_watermarks[tp.topic, tp.partition] = partition_log.high_watermark
            self._log_starts[tp.topic, tp.partition] = partition_log.log_start_offset
            partition_log.close()  # flushes: its recovery point is its end
            self._closed_logs[tp] = partition_log.recovery_point
            return True
        return False

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Deletes the log and its directory; False if there was none."""
        tp = TopicPartition(topic, partition)
        self._high_watermarks.pop((topic, partition), None)
        self._log_starts.pop((topic, partition), None)
        partition_log = self._logs.pop(tp, None)
        if partition_log is None:
            if self.offline.pop(tp, None) is None and tp not in self._closed_logs:
                return False
            self._offline_points.pop(tp, None)
            self._closed_logs.pop(tp, None)
            # A closed or offline log goes with its topic (nobody will repair what was deleted).
            shutil.rmtree(self.data_dir / partition_dir_name(topic, partition), ignore_errors=True)
            fsync_dir(self.data_dir)
            return True
        partition_log.delete()
        fsync_dir(self.data_dir)
        return True

    def take_offline(self, topic: str, partition: int, error: CorruptLogError) -> None:
        """A log whose flushed data was found not to read back (by the scrubber): closed and
        kept as it is, answered KAFKA_STORAGE_ERROR from now on, as if found at start-up."""
        tp = TopicPartition(topic, partition)
        self._high_watermarks.pop((topic, partition), None)
        partition_log = self._logs.pop(tp, None)
        if partition_log is None:
            return
        partition_log.close()
        self._set_offline(tp, error, partition_log.recovery_point)

    def _set_offline(self, tp: TopicPartition, error: CorruptLogError, recovery_point: int) -> None:
        log.error("partition %s-%d is offline: %s", tp.topic, tp.partition, error)
        self.offline[tp] = error
        self._offline_points[tp] = max(recovery_point, error.offset + 1)
        # The marker keeps it offline across restarts: a clean start trusts closed segments
        # and would otherwise serve the damage again. Removing it is the operator's "repaired".
        marker = self.data_dir / partition_dir_name(tp.topic, tp.partition) / OFFLINE_MARKER
        try:
            atomic_write(marker, json.dumps(error.details()).encode())
        except OSError as exc:
            log.error("cannot write %s: %s", marker, exc)  # noqa: TRY400

    def partitions(self) -> list[TopicPartition]:
        """Every partition with a log here: open, closed for now, or offline."""
        return [*self._logs, *self._closed_logs, *self.offline]

    def sizes(self) -> dict[TopicPartition, int]:
        """Bytes in each partition's segments, open or not (offline ones left out)."""
        sizes = {tp: plog.size_in_bytes for tp, plog in self._logs.items()}
        for tp in self._closed_logs:
            directory = self.data_dir / partition_dir_name(tp.topic, tp.partition)
            with os.scandir(directory) as entries:
                sizes[tp] = sum(e.stat().st_size for e in entries if e.name.endswith(".log"))
        return sizes

    def all_logs(self) -> dict[TopicPartition, PartitionLog]:
        return dict(self._logs)

    # --- periodic work ------------------------------------------------------------

    def flush_due(self, now_ms: int) -> list[PartitionLog]:
        """The logs to flush now: their flush policy says so, or they rolled a
        segment since their last flush. Run ``log.flush`` in a worker thread."""
        return [
            partition_log
            for partition_log in self._logs.values()
            if partition_log.rolled_unflushed or partition_log.needs_flush(now_ms)
        ]

    def recovery_points(self) -> dict[tuple[str, int], int]:
        points: dict[tuple[str, int], int] = {
            tp: partition_log.recovery_point for tp, partition_log in self._logs.items()
        }
        points.update({(tp.topic, tp.partition): point for tp, point in self._closed_logs.items()})
        # An offline log keeps a recovery point past its corruption, so that no later start
        # (clean or not) mistakes the corrupt batch for a torn tail and cuts it off.
        points.update({(tp.topic, tp.partition): point for tp, point in self._offline_points.items()})
        return points

    def checkpoint_recovery_points(self) -> bool:
        """Writes the recovery-point checkpoint if it changed since the last
        write (two fsyncs); returns whether it wrote."""
        points = self.recovery_points()
        if points == self._last_checkpoint:
            return False
        write_checkpoint(self.data_dir / RECOVERY_POINT_CHECKPOINT, points)
        self._last_checkpoint = points
        return True

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        marks = dict(self._high_watermarks)
        marks.update({(tp.topic, tp.partition): plog.high_watermark for tp, plog in self._logs.items()})
        return marks

    def checkpoint_high_watermarks(self) -> bool:
        """Writes ``replication-offset-checkpoint`` if a high watermark moved since the last write."""
        marks = self.high_watermarks()
        if marks == self._last_hw_checkpoint:
            return False
        write_checkpoint(self.data_dir / HIGH_WATERMARK_CHECKPOINT, marks)
        self._last_hw_checkpoint = marks
        return True

    def log_start_offsets(self) -> dict[tuple[str, int], int]:
        starts = dict(self._log_starts)
        starts.update({(tp.topic, tp.partition): plog.log_start_offset for tp, plog in self._logs.items()})
        return starts

    def checkpoint_log_start_offsets(self) -> bool:
        """Writes ``log-start-offset-checkpoint`` if a log start offset moved since the last write."""
        starts = self.log_start_offsets()
        if starts == self._last_start_checkpoint:
            return False
        write_checkpoint(self.data_dir / LOG_START_OFFSET_CHECKPOINT, starts)
        self._last_start_checkpoint = starts
        return True

    def apply_retention(self, now_ms: int) -> int:
        """Deletes old segments of every log and forgets idle producers;
        returns how many segments went. Closed logs are opened for it in turn
        (each closing the least recently used one while ``max_open`` are open)."""
        deleted = 0
        for tp in [*self._closed_logs, *self._logs]:
            try:
                partition_log = self.get_or_create(tp.topic, tp.partition)
            except (OSError, CorruptLogError) as exc:
                log.warning("retention skips %s-%d: %s", tp.topic, tp.partition, exc)
                continue
            deleted += partition_log.delete_old_segments(now_ms)
            partition_log.expire_producers(now_ms)
        return deleted

    def close(self) -> None:
        """Flushes and closes every log, checkpoints, and marks the shutdown
        clean. A log that fails to close leaves the marker unwritten, so the
        next start recovers."""
        if self._closed:
            return
        self._closed = True
        failed = False
        try:
            self.checkpoint_high_watermarks()
        except OSError:
            log.exception("writing %s failed", HIGH_WATERMARK_CHECKPOINT)
        try:
            self.checkpoint_log_start_offsets()
        except OSError:
            log.exception("writing %s failed", LOG_START_OFFSET_CHECKPOINT)
        for tp, partition_log in self._logs.items():
            try:
                partition_log.close()
            except OSError:
                log.exception("closing log %s-%d failed", tp.topic, tp.partition)
                failed = True
        self.checkpoint_recovery_points()
        if not failed:
            fd = os.open(self.data_dir / CLEAN_SHUTDOWN_MARKER, os.O_WRONLY | os.O_CREAT | OPEN_FLAGS, 0o644)
            os.close(fd)
            fsync_dir(self.data_dir)
