"""Batches rewritten with fewer records (a log cleaner's) and renumbered (a mirror's copy of one):
every field Kafka keeps is kept, every record kept decodes as it was, and the bytes check out."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.protocol.compression import Compression
from tributary.protocol.records import (
    DELETE_HORIZON_BIT,
    LOG_APPEND_TIME,
    BatchBuilder,
    check_records,
    dense_batch,
    empty_batch,
    filtered_batch,
    has_gaps,
    iter_records,
    parse_batch_header,
    stamp_log_append_time,
    validate_batch,
)

_records = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=12)),
        st.one_of(st.none(), st.binary(max_size=40)),
        st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=2),
        st.integers(-5000, 5000),
    ),
    min_size=1,
    max_size=12,
)


Spec = list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]


def _build(records: Spec, **options: object) -> bytes:
    builder = BatchBuilder(**options)  # type: ignore[arg-type]
    for key, value, headers, step in records:
        builder.append(key, value, headers, 1_700_000_000_000 + step)
    return builder.build()


@settings(max_examples=150, deadline=None)
@given(
    records=_records,
    keep=st.lists(st.booleans(), min_size=12, max_size=12),
    codec=st.sampled_from(list(Compression)),
    horizon=st.one_of(st.none(), st.integers(0, 2**41)),
    base=st.integers(0, 2**40),
    transactional=st.booleans(),
)
def test_a_filtered_batch_keeps_its_offsets_fields_and_the_records_kept(  # noqa: PLR0917 (hypothesis's)
    records: Spec,
    keep: list[bool],
    codec: Compression,
    horizon: int | None,
    base: int,
    transactional: bool,
) -> None:
    original = _build(
        records, compression=codec, base_offset=base, producer_id=7, producer_epoch=3, base_sequence=11,
        partition_leader_epoch=5, is_transactional=transactional,
    )  # fmt: skip
    header = parse_batch_header(original)
    decoded = list(iter_records(original))
    kept = [record for record, k in zip(decoded, keep, strict=False) if k] or decoded[-1:]
    data = filtered_batch(header, kept, delete_horizon_ms=horizon)
    rewritten = validate_batch(data)  # CRC and header check out
    assert list(iter_records(data)) == kept  # offsets, timestamps, keys, values, headers
    assert rewritten.base_offset == base and rewritten.last_offset == header.last_offset
    assert rewritten.record_count == len(kept)
    assert (rewritten.producer_id, rewritten.producer_epoch, rewritten.base_sequence) == (7, 3, 11)
    assert rewritten.partition_leader_epoch == 5
    assert rewritten.compression == codec and rewritten.is_transactional == transactional
    assert rewritten.delete_horizon_ms == horizon
    assert rewritten.max_timestamp == max(record.timestamp for record in kept)
    assert has_gaps(rewritten) == (len(kept) != len(decoded))
    # A second rewrite without a new horizon keeps the one stamped.
    again = filtered_batch(rewritten, kept)
    assert parse_batch_header(again).delete_horizon_ms == horizon
    assert list(iter_records(again)) == kept


@settings(max_examples=100, deadline=None)
@given(
    records=_records,
    keep=st.lists(st.booleans(), min_size=12, max_size=12),
    codec=st.sampled_from(list(Compression)),
)
def test_a_dense_copy_renumbers_from_the_base_and_passes_a_brokers_checks(
    records: Spec,
    keep: list[bool],
    codec: Compression,
) -> None:
    original = _build(records, compression=codec, base_offset=1000)
    decoded = list(iter_records(original))
    kept = [record for record, k in zip(decoded, keep, strict=False) if k] or decoded[:1]
    cleaned = filtered_batch(parse_batch_header(original), kept, delete_horizon_ms=123)
    dense = dense_batch(cleaned)
    header = validate_batch(dense)
    assert not has_gaps(header)
    assert header.delete_horizon_ms == 123 and header.compression == codec
    check_records(dense, 0, header, max_size=1 << 20)  # what a broker checks on produce
    copied = list(iter_records(dense))
    assert [r.offset for r in copied] == list(range(1000, 1000 + len(kept)))
    assert [(r.timestamp, r.key, r.value, r.headers) for r in copied] == [
        (r.timestamp, r.key, r.value, r.headers) for r in kept
    ]
    if not has_gaps(parse_batch_header(cleaned)):
        assert dense == cleaned  # nothing to renumber: the same bytes


def test_an_empty_batch_keeps_offsets_and_sequence_and_holds_no_records() -> None:
    original = _build(
        [(b"k", b"v", [], 0)] * 5, compression=Compression.ZSTD, base_offset=40, producer_id=9, producer_epoch=1,
        base_sequence=100,
    )  # fmt: skip
    header = parse_batch_header(original)
    data = empty_batch(header)
    empty = validate_batch(data)
    assert (empty.base_offset, empty.last_offset, empty.record_count) == (40, 44, 0)
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence) == (9, 1, 100)
    assert empty.compression == Compression.NONE and not empty.attributes & DELETE_HORIZON_BIT
    assert list(iter_records(data)) == []
    with pytest.raises(ValueError, match="no records"):
        dense_batch(data)


def test_log_append_time_survives_a_rewrite() -> None:
    data = bytearray(_build([(b"a", b"1", [], 0), (b"b", b"2", [], 5)]))
    header = stamp_log_append_time(data, 0, parse_batch_header(data), 1_800_000_000_000)
    kept = list(iter_records(bytes(data)))[1:]
    rewritten = filtered_batch(header, kept)
    assert parse_batch_header(rewritten).timestamp_type == LOG_APPEND_TIME
    assert [r.timestamp for r in iter_records(rewritten)] == [1_800_000_000_000]


def test_kept_records_must_be_the_batchs_own_in_order() -> None:
    data = _build([(b"a", b"1", [], 0), (b"b", b"2", [], 1)], base_offset=10)
    header = parse_batch_header(data)
    records = list(iter_records(data))
    with pytest.raises(ValueError, match="in order"):
        filtered_batch(header, records[::-1])
    with pytest.raises(ValueError, match="at least one"):
        filtered_batch(header, [])


def test_check_records_counts_null_keys() -> None:
    data = _build([(None, b"1", [], 0), (b"k", b"2", [], 1), (None, None, [], 2)], compression=Compression.GZIP)
    assert check_records(data, 0, parse_batch_header(data), max_size=1 << 20) == 2
