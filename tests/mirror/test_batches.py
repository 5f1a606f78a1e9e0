"""mirror.batches, sans-IO: which fetched batches the mirror copies, and the bytes it produces.

Batches are built with protocol.records and assembled into a RawBatches exactly as
a READ_COMMITTED fetch returns them: concatenated batches with broker-assigned base
offsets, plus the (producer id, first offset) of each aborted transaction.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.client.raw.batches import RawBatches
from tributary.mirror.batches import Run, Stamp, copyable, for_target, prepare, same_batch, stamp_fetch
from tributary.mirror.offset_map import MappingEntry, PartitionMap
from tributary.protocol.records import (
    CONTROL_BIT,
    HEADER_SIZE,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TRANSACTIONAL_BIT,
    BatchBuilder,
    Compression,
    build_batch,
    check_records,
    empty_batch,
    filtered_batch,
    iter_batches,
    iter_records,
    parse_batch_header,
    rewrite_crc,
    set_base_offset,
    validate_batch,
)

_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_AT = 21  # baseOffset 8, batchLength 4, partitionLeaderEpoch 4, magic 1, crc 4
ABORT, COMMIT = 0, 1


def data_batch(
    values: Sequence[bytes],
    *,
    producer_id: int = NO_PRODUCER_ID,
    transactional: bool = False,
    compression: Compression = Compression.NONE,
    epoch: int | None = None,
    sequence: int | None = None,
    timestamp: int = 1_700_000_000_000,
) -> bytes:
    idempotent = producer_id != NO_PRODUCER_ID
    return build_batch(
        [(b"k%d" % i, v, [("h", b"x")], timestamp + i) for i, v in enumerate(values)],
        compression=compression,
        producer_id=producer_id,
        producer_epoch=(epoch if epoch is not None else 3) if idempotent else NO_PRODUCER_EPOCH,
        base_sequence=(sequence if sequence is not None else 0) if idempotent else NO_SEQUENCE,
        is_transactional=transactional,
    )


def control_batch(producer_id: int, marker: int, *, epoch: int = 3) -> bytes:
    """A transaction marker as a broker writes it: transactional + control bits, one
    uncompressed record whose key is (version 0, type) and value (version 0, coordinator epoch)."""
    builder = BatchBuilder(producer_id=producer_id, producer_epoch=epoch, is_transactional=True)
    builder.append(struct.pack(">hh", 0, marker), struct.pack(">hi", 0, 7), (), 1_700_000_000_000)
    buf = bytearray(builder.build())
    (attributes,) = _ATTRIBUTES.unpack_from(buf, _ATTRIBUTES_AT)
    _ATTRIBUTES.pack_into(buf, _ATTRIBUTES_AT, attributes | CONTROL_BIT)
    rewrite_crc(buf)
    return bytes(buf)


def log_of(batches: Sequence[bytes], base: int = 0) -> list[bytes]:
    """The batches with consecutive broker offsets from ``base``, as a log holds them."""
    out = []
    offset = base
    for batch in batches:
        buf = bytearray(batch)
        set_base_offset(buf, 0, offset)
        header = parse_batch_header(buf)
        offset = header.next_offset
        out.append(bytes(buf))
    return out


def fetched(batches: Sequence[bytes], fetch_offset: int, aborted: Sequence[tuple[int, int]] = ()) -> RawBatches:
    records = b"".join(batches)
    headers = tuple(iter_batches(records))
    end = headers[-1][1].next_offset if headers else fetch_offset
    return RawBatches(
        topic="t", partition=0, fetch_offset=fetch_offset, records=records, batches=headers,
        high_watermark=end, log_start_offset=0, last_stable_offset=end, aborted_transactions=tuple(aborted),
    )  # fmt: skip


def copied(raw: RawBatches, start: int) -> list[bytes]:
    return [data for _, data in copyable(raw, start)]


# --- copyable: hand-written cases ---------------------------------------------------------------


def test_control_batch_is_well_formed() -> None:
    """The helper builds what the code under test expects: a valid control batch."""
    header = validate_batch(control_batch(5, COMMIT))
    assert header.is_control and header.is_transactional and header.producer_id == 5


def test_control_batches_are_never_copied() -> None:
    batches = log_of([
        data_batch([b"a"], producer_id=5, transactional=True),
        control_batch(5, COMMIT),
        data_batch([b"b"], producer_id=6, transactional=True),
        control_batch(6, ABORT),
        control_batch(9, COMMIT),  # a marker of a transaction with no data in range
        control_batch(9, ABORT),
    ])  # fmt: skip
    out = copied(fetched(batches, 0, [(6, 2)]), 0)
    assert out == [batches[0]]
    assert all(not parse_batch_header(b).is_control for b in out)


def test_only_control_batches_yields_nothing() -> None:
    batches = log_of([control_batch(1, COMMIT), control_batch(2, ABORT), control_batch(3, COMMIT)])
    assert copied(fetched(batches, 0, [(2, 1)]), 0) == []


def test_aborted_transaction_dropped_committed_and_plain_kept() -> None:
    # offsets: 0-1 plain, 2-3 p10 (aborted), 4 p11 (committed), 5 idempotent, 6 p10 data,
    # 7 p11 data, 8 abort(p10), 9 commit(p11), 10 plain
    batches = log_of([
        data_batch([b"plain0", b"plain1"]),
        data_batch([b"a0", b"a1"], producer_id=10, transactional=True),
        data_batch([b"c0"], producer_id=11, transactional=True),
        data_batch([b"idem"], producer_id=12),
        data_batch([b"a2"], producer_id=10, transactional=True, sequence=2),
        data_batch([b"c1"], producer_id=11, transactional=True, sequence=1),
        control_batch(10, ABORT),
        control_batch(11, COMMIT),
        data_batch([b"plain2"]),
    ])  # fmt: skip
    out = copied(fetched(batches, 0, [(10, 2)]), 0)
    assert out == [batches[i] for i in (0, 2, 3, 5, 8)]
    values = [r.value for b in out for r in iter_records(b)]
    assert values == [b"plain0", b"plain1", b"c0", b"idem", b"c1", b"plain2"]


def test_producer_reused_after_abort_is_copied_again() -> None:
    """After its abort marker, the same producer's next (committed) transaction is kept."""
    batches = log_of([
        data_batch([b"x"], producer_id=4, transactional=True),
        control_batch(4, ABORT),
        data_batch([b"y"], producer_id=4, transactional=True, sequence=1),
        control_batch(4, COMMIT),
    ])  # fmt: skip
    assert copied(fetched(batches, 0, [(4, 0)]), 0) == [batches[2]]


def test_aborted_transaction_that_began_before_the_fetch() -> None:
    """The fetch starts mid-transaction; the broker names it with its first offset before the fetch."""
    full = log_of([
        data_batch([b"a0"], producer_id=8, transactional=True),
        data_batch([b"p"]),
        data_batch([b"a1"], producer_id=8, transactional=True, sequence=1),
        control_batch(8, ABORT),
        data_batch([b"q"]),
    ])  # fmt: skip
    out = copied(fetched(full[1:], 1, [(8, 0)]), 1)
    assert out == [full[1], full[4]]


def test_batches_before_the_start_are_skipped() -> None:
    batches = log_of([data_batch([b"a", b"b", b"c"]), data_batch([b"d", b"e"]), data_batch([b"f"])])
    raw = fetched(batches, 0)
    assert copied(raw, 0) == batches
    # Offset 2 lies inside the first batch: it is copied whole (the batch holds the start).
    assert copied(raw, 2) == batches
    assert copied(raw, 3) == batches[1:]
    assert copied(raw, 4) == batches[1:]
    assert copied(raw, 5) == batches[2:]
    assert copied(raw, 6) == []


# --- copyable: a property over interleaved transactions --------------------------------------


@dataclass(frozen=True)
class Planned:
    kind: str  # "plain", "idempotent", "txn", "marker"
    producer: int
    txn: int  # index of the producer's transaction, for "txn" and "marker"
    marker: int = COMMIT
    records: int = 1


@st.composite
def interleavings(draw: st.DrawFn) -> tuple[list[Planned], dict[tuple[int, int], bool]]:
    """A log of several transactional producers' transactions (each ending with a marker,
    as below the last stable offset), plain and idempotent batches interleaved."""
    producers = draw(st.integers(1, 4))
    # Per producer, a list of transactions: (number of data batches, committed?)
    txns = {
        p: draw(st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=0, max_size=3))
        for p in range(100, 100 + producers)
    }
    # Each producer's events in order; the global log interleaves the producers' streams.
    streams: dict[int, list[Planned]] = {}
    outcome: dict[tuple[int, int], bool] = {}
    for p, plan in txns.items():
        events: list[Planned] = []
        for t, (count, committed) in enumerate(plan):
            outcome[(p, t)] = committed
            events += [Planned("txn", p, t, records=draw(st.integers(1, 3))) for _ in range(count)]
            events.append(Planned("marker", p, t, marker=COMMIT if committed else ABORT))
        streams[p] = events
    others = draw(st.lists(st.sampled_from(["plain", "idempotent"]), max_size=6))
    streams[0] = [Planned(kind, 0 if kind == "plain" else 900, 0, records=2) for kind in others]
    order = draw(st.permutations([p for p, events in streams.items() for _ in events]))
    cursor = dict.fromkeys(streams, 0)
    log: list[Planned] = []
    for p in order:
        log.append(streams[p][cursor[p]])
        cursor[p] += 1
    return log, outcome


def build_planned(plan: list[Planned]) -> list[bytes]:
    sequences: dict[int, int] = {}
    raw: list[bytes] = []
    for i, event in enumerate(plan):
        values = [b"%d-%d" % (i, r) for r in range(event.records)]
        if event.kind == "marker":
            raw.append(control_batch(event.producer, event.marker))
        elif event.kind == "plain":
            raw.append(data_batch(values))
        else:
            seq = sequences.get(event.producer, 0)
            sequences[event.producer] = seq + event.records
            raw.append(data_batch(values, producer_id=event.producer, transactional=event.kind == "txn", sequence=seq))
    return log_of(raw)


@settings(max_examples=300, deadline=None)
@given(interleavings(), st.data())
def test_copyable_keeps_exactly_the_non_aborted_data(
    generated: tuple[list[Planned], dict[tuple[int, int], bool]], data: st.DataObject
) -> None:
    plan, outcome = generated
    batches = build_planned(plan)
    headers = [parse_batch_header(b) for b in batches]
    # The fetch may begin at any batch, and the start offset anywhere inside or after it.
    first = data.draw(st.integers(0, len(batches)), label="first fetched batch")
    fetch_offset = headers[first].base_offset if first < len(batches) else (headers[-1].next_offset if headers else 0)
    last_offset = headers[-1].next_offset if headers else 0
    start = data.draw(st.integers(fetch_offset, max(fetch_offset, last_offset)), label="start")
    # What the broker lists: every aborted transaction whose marker is in the fetched range,
    # with the offset of its first batch (possibly before the fetch).
    first_offset: dict[tuple[int, int], int] = {}
    aborted: list[tuple[int, int]] = []
    for event, header in zip(plan, headers, strict=True):
        key = (event.producer, event.txn)
        if event.kind in ("txn", "marker"):
            first_offset.setdefault(key, header.base_offset)
        if event.kind == "marker" and not outcome[key] and header.base_offset >= fetch_offset:
            aborted.append((event.producer, first_offset[key]))
    expected = [
        batch
        for event, header, batch in list(zip(plan, headers, batches, strict=True))[first:]
        if event.kind in ("plain", "idempotent") or (event.kind == "txn" and outcome[(event.producer, event.txn)])
        if header.next_offset > start
    ]
    shuffled = data.draw(st.permutations(aborted), label="aborted order")
    assert copied(fetched(batches[first:], fetch_offset, shuffled), start) == expected


# --- for_target and same_batch ------------------------------------------------------------------


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP, Compression.ZSTD, Compression.LZ4])
@pytest.mark.parametrize("transactional", [False, True])
def test_for_target_detaches_the_producer(compression: Compression, transactional: bool) -> None:
    values = [b"value %d " % i * 20 for i in range(50)]
    source = log_of([data_batch(values, producer_id=77, epoch=5, sequence=1234,
                                transactional=transactional, compression=compression)], base=1000)[0]  # fmt: skip
    before = parse_batch_header(source)
    assert before.producer_id == 77
    out = for_target(parse_batch_header(source), source)
    after = validate_batch(out)  # a valid CRC over the rewritten header and the same compressed bytes
    assert after.crc != before.crc
    assert (after.producer_id, after.producer_epoch, after.base_sequence) == (
        NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE)  # fmt: skip
    assert not after.is_transactional and not after.is_control
    assert after.attributes == before.attributes & ~TRANSACTIONAL_BIT
    assert after.compression == compression
    assert out[HEADER_SIZE:] == source[HEADER_SIZE:], "the compressed records must travel untouched"
    unchanged = ("base_offset", "batch_length", "partition_leader_epoch", "magic", "last_offset_delta",
                 "base_timestamp", "max_timestamp", "record_count")  # fmt: skip
    for name in unchanged:
        assert getattr(after, name) == getattr(before, name), name
    assert [r.value for r in iter_records(out)] == values
    assert validate_batch(source) == before, "the source batch must not be modified in place"


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.ZSTD])
@pytest.mark.parametrize(("producer_id", "transactional"), [(NO_PRODUCER_ID, False), (77, False), (77, True)])
def test_for_target_stamps_the_mirrors_producer(
    compression: Compression, producer_id: int, transactional: bool
) -> None:
    values = [b"value %d " % i * 20 for i in range(30)]
    source = log_of([data_batch(values, producer_id=producer_id, epoch=5, sequence=1234,
                                transactional=transactional, compression=compression)], base=1000)[0]  # fmt: skip
    before = parse_batch_header(source)
    out = for_target(before, source, Stamp(9001, 0, 2**31 - 10))
    after = validate_batch(out)  # a valid CRC over the rewritten header and the same compressed bytes
    assert (after.producer_id, after.producer_epoch, after.base_sequence) == (9001, 0, 2**31 - 10)
    assert not after.is_transactional and not after.is_control
    assert after.compression == compression
    assert out[HEADER_SIZE:] == source[HEADER_SIZE:], "the compressed records must travel untouched"
    assert after._replace(crc=0, attributes=0, producer_id=0, producer_epoch=0, base_sequence=0) == before._replace(
        crc=0, attributes=0, producer_id=0, producer_epoch=0, base_sequence=0
    )
    assert [r.value for r in iter_records(out)] == values
    assert validate_batch(source) == before, "the source batch must not be modified in place"


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.ZSTD])
def test_for_target_leaves_plain_batches_alone(compression: Compression) -> None:
    source = log_of([data_batch([b"a", b"b"], compression=compression)], base=42)[0]
    assert for_target(parse_batch_header(source), source) == source


def test_same_batch_recognises_the_copy() -> None:
    source = log_of([data_batch([b"x" * 100, b"y"], producer_id=3, compression=Compression.ZSTD)], base=500)[0]
    # What the aggregate holds: the produced bytes at another offset and leader epoch.
    aggregate = bytearray(for_target(parse_batch_header(source), source))
    set_base_offset(aggregate, 0, 7)
    struct.pack_into(">i", aggregate, 12, 4)
    agg = bytes(aggregate)
    assert same_batch(
        parse_batch_header(agg), agg, parse_batch_header(source), for_target(parse_batch_header(source), source)
    )


def test_same_batch_rejects_other_batches() -> None:
    def both(batch: bytes) -> tuple[object, bytes]:
        return parse_batch_header(batch), batch

    ref = data_batch([b"a", b"b"], compression=Compression.ZSTD)
    others = {
        "other value": data_batch([b"a", b"c"], compression=Compression.ZSTD),
        "fewer records": data_batch([b"a"], compression=Compression.ZSTD),
        "other timestamp": data_batch([b"a", b"b"], compression=Compression.ZSTD, timestamp=1_700_000_000_001),
        "other codec": data_batch([b"a", b"b"], compression=Compression.NONE),
    }
    ref_header = parse_batch_header(ref)
    assert same_batch(ref_header, ref, ref_header, ref)
    for what, other in others.items():
        assert not same_batch(parse_batch_header(other), other, ref_header, ref), what
    # One flipped byte inside the compressed records.
    flipped = bytearray(ref)
    flipped[-3] ^= 0x01
    assert not same_batch(parse_batch_header(flipped), bytes(flipped), ref_header, ref)


# --- batches a log cleaner rewrote ----------------------------------------------------------------


def _cleaned(codec: Compression = Compression.ZSTD) -> bytes:
    """A batch of offsets 100..109 of which a cleaner kept 100, 101, 104 and 107."""
    original = build_batch(
        [(b"k%d" % i, b"v%d" % i, (("h", b"x"),), 1_700_000_000_000 + i) for i in range(10)],
        compression=codec, base_offset=100, producer_id=9, producer_epoch=0, base_sequence=40,
    )  # fmt: skip
    header = parse_batch_header(original)
    kept = [r for r in iter_records(original) if r.offset in (100, 101, 104, 107)]
    return filtered_batch(header, kept)


def test_a_cleaned_batch_is_renumbered_and_its_runs_map_each_record() -> None:
    data = _cleaned()
    header = parse_batch_header(data)
    prepared = prepare(header, data)
    assert prepared.renumbered
    assert (prepared.header.base_offset, prepared.header.last_offset, prepared.header.record_count) == (100, 103, 4)
    assert prepared.header.compression == Compression.ZSTD
    assert prepared.runs == (Run(100, 101, 0), Run(104, 104, 2), Run(107, 107, 3))
    produced = for_target(prepared.header, prepared.data, Stamp(5, 0, 0))
    check_records(produced, 0, validate_batch(produced), max_size=1 << 20)  # what a broker checks on produce
    source = [(r.timestamp, r.key, r.value, r.headers) for r in iter_records(data)]
    assert [(r.timestamp, r.key, r.value, r.headers) for r in iter_records(produced)] == source
    # Recovery recognises the copy by its records (recompressed, its bytes may differ).
    stored = bytearray(produced)
    set_base_offset(stored, 0, 5000)
    assert same_batch(parse_batch_header(stored), bytes(stored), prepared.header, produced, renumbered=True)
    other = filtered_batch(header, list(iter_records(data))[:3])
    other_prepared = prepare(parse_batch_header(other), other)
    assert not same_batch(parse_batch_header(stored), bytes(stored), other_prepared.header, other, renumbered=True)


def test_translation_through_a_renumbered_batch_is_exact() -> None:
    prepared = prepare(parse_batch_header(_cleaned()), _cleaned())
    aggregate_base = 5000
    entries = [MappingEntry("east", "t", 0, r.first, r.last, aggregate_base + r.position) for r in prepared.runs]
    mapping = PartitionMap(entries)
    # A committed offset is the next record to read: on a kept record, that record; in a gap,
    # the next kept one; past the batch, what follows it.
    assert [mapping.translate(c, recorded_until=110) for c in (100, 101, 102, 103, 104, 105, 107, 108, 110)] == [
        5000, 5001, 5002, 5002, 5002, 5003, 5003, 5004, 5004,
    ]  # fmt: skip


def test_a_plain_batch_is_not_renumbered_and_an_empty_one_is_not_copied() -> None:
    data = build_batch([(b"k", b"v", (), 1)], base_offset=3)
    prepared = prepare(parse_batch_header(data), data)
    assert not prepared.renumbered and prepared.data is data and prepared.runs == (Run(3, 3, 0),)
    original = build_batch([(b"k", b"v", (), 1)] * 3, base_offset=10, producer_id=4, producer_epoch=0, base_sequence=0)
    empty = empty_batch(parse_batch_header(original))
    stored = bytearray(data)
    set_base_offset(stored, 0, 13)
    assert [h.base_offset for h, _ in copyable(fetched([empty, bytes(stored)], 10), 10)] == [13]


# --- stamp_fetch: the copier's one-pass path, against the pieces it stands for -----------------


def _stamped_one_by_one(raw: RawBatches, start: int, stamp: Stamp) -> tuple[list[bytes], list[int]]:
    """What copyable, prepare and for_target make of a fetch, batch by batch."""
    payloads: list[bytes] = []
    sequences = [stamp.base_sequence]
    for header, data in copyable(raw, start):
        prepared = prepare(header, data)
        payloads.append(bytes(for_target(prepared.header, prepared.data, stamp._replace(base_sequence=sequences[-1]))))
        sequences.append((sequences[-1] + prepared.header.last_offset_delta + 1) % 2**31)
    return payloads, sequences


def _check_stamp_fetch(raw: RawBatches, start: int, stamp: Stamp) -> None:
    before = bytes(raw.records)
    out = stamp_fetch(raw, start, stamp)
    payloads, sequences = _stamped_one_by_one(raw, start, stamp)
    assert [bytes(p) for p in out.payloads] == payloads
    assert out.sequences == sequences
    assert [h.base_offset for h in out.headers] == [h.base_offset for h, _ in copyable(raw, start)]
    for index, header in enumerate(out.headers):
        assert (index in out.renumbered) == (header.last_offset_delta != header.record_count - 1)
    assert bytes(raw.records) == before, "the fetched bytes must not be modified in place"


@settings(max_examples=200, deadline=None)
@given(interleavings(), st.data())
def test_stamp_fetch_is_copyable_prepare_and_for_target_in_one_pass(
    generated: tuple[list[Planned], dict[tuple[int, int], bool]], data: st.DataObject
) -> None:
    plan, outcome = generated
    batches = build_planned(plan)
    headers = [parse_batch_header(b) for b in batches]
    end = headers[-1].next_offset if headers else 0
    start = data.draw(st.integers(0, max(end, 0)), label="start")
    aborted: list[tuple[int, int]] = []
    first_offset: dict[tuple[int, int], int] = {}
    for event, header in zip(plan, headers, strict=True):
        key = (event.producer, event.txn)
        if event.kind in ("txn", "marker"):
            first_offset.setdefault(key, header.base_offset)
        if event.kind == "marker" and not outcome[key]:
            aborted.append((event.producer, first_offset[key]))
    sequence = data.draw(st.sampled_from([0, 17, 2**31 - 3]), label="first sequence")
    _check_stamp_fetch(fetched(batches, 0, aborted), start, Stamp(4242, 3, sequence))


def test_stamp_fetch_renumbers_a_cleaned_batch_between_plain_ones() -> None:
    plain = [data_batch([b"a", b"b"], compression=Compression.ZSTD), data_batch([b"c"], producer_id=9)]
    before = log_of(plain[:1], base=90)  # offsets 90-91
    cleaned = bytearray(_cleaned())  # offsets 100-107 with gaps
    after = log_of(plain[1:], base=108)
    batches = [*before, bytes(cleaned), *after]
    for start in (0, 91, 92, 104, 108, 109):
        _check_stamp_fetch(fetched(batches, 90), start, Stamp(5, 1, 2**31 - 2))
