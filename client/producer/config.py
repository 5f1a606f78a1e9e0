"""Producer settings, sans-IO: Kafka's producer configuration under Python names.

Settings keep Kafka's names and units where Kafka has them (``linger_ms`` is
``linger.ms``; ``batch_bytes`` is ``batch.size``, renamed because it counts
bytes, not records). Connection-level settings (``request_timeout``,
``retry_backoff``, ``max_in_flight``, ...) are the
:class:`~client.config.ClientConfig` ones; :func:`split_settings` sorts a
``**settings`` mix into the two.

Defaults are Kafka 3.x's (acks=all, idempotence on with acks=all, 16 KiB
batches, 32 MiB of buffer, a 120 s delivery timeout), except two: batches are
compressed with zstd unless told otherwise (the appliance ships compressed
batches end to end), and ``linger_ms`` is 5 (Kafka 3.x: 0, Kafka 4: 5,
librdkafka: 5), so records sent close together share a batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tributary.client.config import ClientConfig
from tributary.client.config import split_settings as split_config
from tributary.protocol.compression import Compression

#: ``acks`` values: the leader alone, none (no response at all), every in-sync replica.
ACKS_LEADER = 1
ACKS_NONE = 0
ACKS_ALL = -1

#: Kafka's sequence numbers are int32 and wrap to 0 after 2**31 - 1.
_MAX_RETRIES = 2**31 - 1


def parse_acks(value: int | str) -> int:
    """``"all"`` (or -1), 0 or 1 as the wire's -1, 0 or 1."""
    if value == "all":
        return ACKS_ALL
    if isinstance(value, int) and not isinstance(value, bool) and value in (ACKS_ALL, ACKS_NONE, ACKS_LEADER):
        return value
    raise ValueError(f'acks must be 0, 1, -1 or "all", not {value!r}')


def parse_compression(value: Compression | int | str | None) -> Compression:
    """A codec by name ("none", "gzip", "snappy", "lz4", "zstd"), id or enum member."""
    if value is None:
        return Compression.NONE
    if isinstance(value, str):
        try:
            return Compression[value.upper()]
        except KeyError:
            names = ", ".join(c.name.lower() for c in Compression)
            raise ValueError(f"unknown compression {value!r}; one of {names}") from None
    return Compression(value)


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    #: ``acks``: 0 (no answer: a send completes with offset -1 once written),
    #: 1 (the leader appended) or -1 / "all" (every in-sync replica did).
    acks: int | str = ACKS_ALL
    #: ``linger.ms``: how long a batch that is not full waits for more records.
    linger_ms: float = 5.0
    #: ``batch.size``: a partition's batch is sent once its records (before
    #: compression) reach this many bytes. A larger record gets a batch of its own.
    batch_bytes: int = 16 * 1024
    #: ``compression.type``: "none", "gzip", "snappy", "lz4" or "zstd".
    compression: Compression | int | str | None = Compression.ZSTD
    #: ``compression.level``: None is the codec's default (zstd: 3).
    compression_level: int | None = None
    #: ``enable.idempotence``: None means "on when acks is all", as in Kafka 3.x.
    enable_idempotence: bool | None = None
    #: ``retries``: how often a batch is resent after a retriable error; the
    #: delivery timeout bounds retries in time anyway.
    retries: int = _MAX_RETRIES
    #: ``delivery.timeout.ms``: a record not acknowledged this long after it
    #: was sent fails with DeliveryTimeoutError (or, after a batch came back
    #: with a final error, that error). A request in flight then is given its
    #: ``request_timeout`` to answer first.
    delivery_timeout_ms: float = 120_000
    #: ``buffer.memory``: the bytes of records (uncompressed, as counted for
    #: ``batch_bytes``) waiting to be sent or acknowledged. A send that would
    #: go beyond it waits until acknowledged (or failed) batches free room.
    buffer_memory: int = 32 * 1024 * 1024
    #: ``max.request.size``: the largest record accepted, and the most record
    #: bytes one Produce request carries.
    max_request_size: int = 1024 * 1024
    #: ``max.block.ms``: how long a send waits for an unknown topic to appear
    #: in the metadata before UnknownTopicOrPartitionError.
    max_block_ms: float = 60_000

    def __post_init__(self) -> None:
        object.__setattr__(self, "acks", parse_acks(self.acks))
        object.__setattr__(self, "compression", parse_compression(self.compression))
        for name in ("batch_bytes", "buffer_memory", "max_request_size", "delivery_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}")
        for name in ("linger_ms", "retries", "max_block_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, not {getattr(self, name)}")
        if self.enable_idempotence and self.acks != ACKS_ALL:
            raise ValueError(f'idempotence needs acks="all" (-1), not acks={self.acks}')
        if self.enable_idempotence and self.retries == 0:
            raise ValueError("idempotence needs retries > 0")

    @property
    def idempotent(self) -> bool:
        if self.enable_idempotence is None:
            return self.acks == ACKS_ALL and self.retries > 0
        return self.enable_idempotence

    @property
    def codec(self) -> Compression:
        assert isinstance(self.compression, Compression)
        return self.compression

    @property
    def required_acks(self) -> int:
        assert isinstance(self.acks, int)
        return self.acks


def split_settings(
    settings: Mapping[str, Any], client_config: ClientConfig | None = None
) -> tuple[ProducerConfig, ClientConfig]:
    """The producer and client settings named in ``settings`` (ClientConfig fields go
    on top of ``client_config``). An unknown name raises TypeError, listing it."""
    producer, client = split_config(settings, ProducerConfig, client_config, "producer")
    if producer.idempotent and client.max_in_flight > 5:
        # The broker remembers a producer's last five batches per partition:
        # a retry of an older one could not be recognised as a duplicate.
        raise ValueError(f"idempotence allows at most 5 requests in flight, not max_in_flight={client.max_in_flight}")
    return producer, client


__all__ = [
    "ACKS_ALL",
    "ACKS_LEADER",
    "ACKS_NONE",
    "ProducerConfig",
    "parse_acks",
    "parse_compression",
    "split_settings",
]
