"""mirror.translation, sans-IO: translation entries and the lookup of committed offsets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.mirror.offset_map import MappingEntry, PartitionMap, TranslationError, partition_maps


def entry(source_base: int, source_last: int, aggregate_base: int, *, topic: str = "t", partition: int = 0,
          alias: str = "east") -> MappingEntry:  # fmt: skip
    return MappingEntry(alias, topic, partition, source_base, source_last, aggregate_base)


# --- the record format ----------------------------------------------------------------------------


@st.composite
def entries(draw: st.DrawFn) -> MappingEntry:
    source_base = draw(st.integers(0, 2**62))
    return MappingEntry(
        alias=draw(st.text(min_size=1, max_size=20)),
        topic=draw(st.text(min_size=1, max_size=60)),
        partition=draw(st.integers(0, 10_000)),
        source_base=source_base,
        source_last=source_base + draw(st.integers(0, 10_000)),
        aggregate_base=draw(st.integers(0, 2**62)),
    )


@settings(max_examples=200)
@given(entries())
def test_entry_round_trip(original: MappingEntry) -> None:
    assert MappingEntry.decode(original.key(), original.value()) == original
    span = original.source_last - original.source_base
    assert original.aggregate_next == original.aggregate_base + span + 1


def test_key_identifies_the_batch_not_its_landing_place() -> None:
    """Compaction keeps one entry per source batch: a re-recorded entry has the same key."""
    assert entry(10, 19, 100).key() == entry(10, 25, 300).key()
    assert entry(10, 19, 100).key() != entry(11, 19, 100).key()
    assert entry(10, 19, 100).key() != entry(10, 19, 100, partition=1).key()
    assert entry(10, 19, 100).key() != entry(10, 19, 100, topic="u").key()
    assert entry(10, 19, 100).key() != entry(10, 19, 100, alias="west").key()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (None, b'{"source_last":1,"aggregate_base":2}'),
        (b'["east","t",0,0]', None),  # a tombstone
        (b"not json", b'{"source_last":1,"aggregate_base":2}'),
        (b'["east","t",0]', b'{"source_last":1,"aggregate_base":2}'),
        (b'["east","t",0,0]', b'{"source_last":1}'),
        (b'["east","t",0,0]', b"[1,2]"),
        (b'["east","t","zero",0]', b'{"source_last":1,"aggregate_base":2}'),
        (b"\xff\xfe", b"\xff"),
    ],
)
def test_decode_ignores_what_is_not_an_entry(key: bytes | None, value: bytes | None) -> None:
    assert MappingEntry.decode(key, value) is None


# --- PartitionMap.translate: hand-written cases -----------------------------------------------------

# Source log: batch 0-4, marker at 5, batch 6-9, aborted 10-14 + marker 15, batch 16-16.
# Aggregate: the copied batches back to back: 0-4, 5-8, 9.
GAPPY = PartitionMap([entry(0, 4, 0), entry(6, 9, 5), entry(16, 16, 9)])


@pytest.mark.parametrize(
    ("committed", "expected"),
    [
        (0, 0), (3, 3), (4, 4),  # inside the first batch
        (5, 5),  # at the marker: the next copied batch
        (6, 5), (8, 7), (9, 8),  # inside the second
        (10, 9), (13, 9), (15, 9),  # in the aborted transaction and its marker
        (16, 9),  # the last batch
        (17, 10),  # right after the last copied batch
    ],
)  # fmt: skip
def test_translate_inside_between_and_past(committed: int, expected: int) -> None:
    assert GAPPY.translate(committed) == expected


def test_translate_past_the_entries_needs_the_checkpoint() -> None:
    """Past the last entry the mirror may have copied batches whose entries are not written
    yet: only the checkpoint (everything below it recorded) makes the answer exact."""
    assert GAPPY.translate(1000, recorded_until=1000) == 10  # only skipped batches in between
    with pytest.raises(TranslationError, match="past what the mirror has recorded"):
        GAPPY.translate(1000)
    with pytest.raises(TranslationError, match="past what the mirror has recorded"):
        GAPPY.translate(1000, recorded_until=500)


def test_translate_before_the_first_batch_is_an_error() -> None:
    """Mirroring began later (retention, or start-position latest): nothing maps there."""
    late = PartitionMap([entry(100, 109, 0)])
    assert late.translate(100) == 0
    with pytest.raises(TranslationError, match="precedes"):
        late.translate(99)


def test_translate_without_entries_is_an_error() -> None:
    with pytest.raises(TranslationError):
        PartitionMap([]).translate(0)


def test_duplicates_later_entry_wins_and_order_does_not_matter() -> None:
    """An entry re-written after a crash replaces its twin (as compaction would)."""
    entries = [entry(10, 19, 110), entry(0, 9, 100), entry(20, 29, 120), entry(10, 19, 110), entry(0, 9, 100)]
    m = PartitionMap(entries)
    assert [e.source_base for e in m.entries] == [0, 10, 20]
    assert [m.translate(c) for c in (0, 9, 10, 15, 29, 30)] == [100, 109, 110, 115, 129, 130]
    replaced = PartitionMap([entry(0, 9, 100), entry(0, 9, 500)])
    assert replaced.translate(3) == 503


def test_partition_maps_groups_by_partition_and_keeps_one_alias() -> None:
    entries = [
        entry(0, 9, 0, partition=0), entry(0, 4, 0, partition=1), entry(5, 9, 5, partition=1),
        entry(0, 9, 50, topic="u"), entry(0, 9, 900, alias="west"),
    ]  # fmt: skip
    maps = partition_maps(entries, "east")
    assert sorted(maps) == [("t", 0), ("t", 1), ("u", 0)]
    assert maps[("t", 0)].translate(3) == 3
    assert maps[("t", 1)].translate(7) == 7
    assert maps[("u", 0)].translate(3) == 53
    assert partition_maps(entries, "west")[("t", 0)].translate(3) == 903


# --- PartitionMap.translate against a brute-force model ---------------------------------------------


@st.composite
def copied_logs(draw: st.DrawFn) -> list[MappingEntry]:
    """Batches copied from a source partition: gaps between them (markers, aborted transactions)
    and aggregate offsets that usually follow on but may jump (another writer appended to the
    aggregate partition)."""
    source = draw(st.integers(0, 50))
    aggregate = draw(st.integers(0, 50))
    entries = []
    for _ in range(draw(st.integers(1, 12))):
        source += draw(st.sampled_from([0, 0, 0, 1, 2, 7]))
        span = draw(st.integers(0, 9))
        entries.append(entry(source, source + span, aggregate))
        source += span + 1
        aggregate += span + 1 + draw(st.sampled_from([0, 0, 0, 0, 3]))
    return entries


def brute_force(entries: list[MappingEntry], committed: int) -> int:
    """Record by record: the aggregate offset of the first copied source offset at or after
    ``committed``; past them all, the aggregate offset after the last copied batch."""
    at: dict[int, int] = {}
    for e in entries:
        for d in range(e.source_last - e.source_base + 1):
            at[e.source_base + d] = e.aggregate_base + d
    later = [o for o in at if o >= committed]
    if later:
        return at[min(later)]
    return max(e.aggregate_next for e in entries)


@settings(max_examples=300)
@given(copied_logs(), st.data())
def test_translate_matches_the_model(entries: list[MappingEntry], data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(entries + data.draw(st.lists(st.sampled_from(entries)))))
    mapping = PartitionMap(shuffled)
    first = entries[0].source_base
    end = entries[-1].source_last + 5
    for committed in range(first, end):
        assert mapping.translate(committed, recorded_until=end) == brute_force(entries, committed), committed
    if first > 0:
        with pytest.raises(TranslationError):
            mapping.translate(first - 1)
