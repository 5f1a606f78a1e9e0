"""The read tasks' own Parquet writer (loader/write.py), without Spark: files per directory, what
their descriptions say, the columns Spark's writer gives them, and a retried attempt replacing
rather than adding."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from tributary.loader.plan import Range
from tributary.loader.schema import ARROW_SCHEMA
from tributary.loader.write import FILE_SCHEMA, RangeWriter, directory_name, escape_path_name

HOUR_MS = 3_600_000
# 2024-03-01 22:30 UTC: records an hour apart cross midnight after two.
FIRST_MS = int(datetime(2024, 3, 1, 22, 30, tzinfo=UTC).timestamp() * 1000)


def records(topic: str, partition: int, offsets: range, step_ms: int) -> pa.RecordBatch:
    """A batch as read.py makes it: offsets in order, one record per ``step_ms``."""
    dc, _, source = topic.partition(".") if "." in topic else (None, "", topic)
    rows = []
    for i, offset in enumerate(offsets):
        ms = FIRST_MS + i * step_ms
        rows.append({
            "topic": topic, "partition": partition, "offset": offset,
            "timestamp": datetime.fromtimestamp(ms / 1000, UTC), "key": b"k%d" % offset,
            "value": b"v%d" % offset, "headers": [{"key": "h", "value": b"x"}] if offset % 2 else [],
            "source_datacenter": dc, "source_topic": source,
            "event_date": datetime.fromtimestamp(ms / 1000, UTC).date(),
        })  # fmt: skip
    return pa.RecordBatch.from_pylist(rows, schema=ARROW_SCHEMA)


def write(tmp_path: Path, r: Range, *batches: pa.RecordBatch) -> list[dict[str, object]]:
    writer = RangeWriter(pafs.LocalFileSystem(), str(tmp_path), r, tmp_path.as_uri())
    for batch in batches:
        writer.add(batch)
    return writer.close()


def test_a_file_per_event_date_in_offset_order_described(tmp_path: Path) -> None:
    r = Range("east.clicks", 2, 100, 106)
    # Six records an hour apart from 22:30: two on March 1st, four on the 2nd, in two batches.
    first, second = records(r.topic, 2, range(100, 103), HOUR_MS), records(r.topic, 2, range(103, 106), HOUR_MS)
    second = pa.RecordBatch.from_pylist(
        [{**row, "timestamp": datetime.fromtimestamp((FIRST_MS + (i + 3) * HOUR_MS) / 1000, UTC),
          "event_date": datetime.fromtimestamp((FIRST_MS + (i + 3) * HOUR_MS) / 1000, UTC).date()}
         for i, row in enumerate(second.to_pylist())],
        schema=ARROW_SCHEMA,
    )  # fmt: skip
    written = sorted(write(tmp_path, r, first, second), key=lambda w: str(w["event_date"]))
    assert [w["directory"] for w in written] == [
        "topic=east.clicks/source_datacenter=east/event_date=2024-03-01",
        "topic=east.clicks/source_datacenter=east/event_date=2024-03-02",
    ]
    day1, day2 = written
    assert (day1["first_offset"], day1["last_offset"], day1["rows"]) == (100, 101, 2)
    assert (day2["first_offset"], day2["last_offset"], day2["rows"]) == (102, 105, 4)
    assert (day1["min_timestamp_ms"], day1["max_timestamp_ms"]) == (FIRST_MS, FIRST_MS + HOUR_MS)
    assert json.loads(str(day2["hours"])) == {
        str((FIRST_MS + i * HOUR_MS) // HOUR_MS * HOUR_MS): 1 for i in range(2, 6)
    }
    for w in written:
        path = Path(str(w["staged"]).removeprefix("file://"))
        assert path.name == "east.clicks-2-100-106.parquet"
        assert w["bytes"] == path.stat().st_size
        table = pq.ParquetFile(path).read()
        assert table.schema.equals(FILE_SCHEMA)
        offsets = table.column("offset").to_pylist()
        assert offsets == sorted(offsets) and offsets[0] == w["first_offset"] and offsets[-1] == w["last_offset"]
    # Nothing but the two files: no temporary file left behind.
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["east.clicks-2-100-106.parquet"] * 2


def test_columns_and_values_as_spark_writes_them(tmp_path: Path) -> None:
    r = Range("plain", 0, 0, 3)
    (w,) = write(tmp_path, r, records("plain", 0, range(3), 1000))
    assert w["directory"] == "topic=plain/source_datacenter=__HIVE_DEFAULT_PARTITION__/event_date=2024-03-01"
    assert w["source_datacenter"] is None
    metadata = pq.ParquetFile(str(w["staged"]).removeprefix("file://")).metadata
    assert metadata.row_group(0).column(0).compression == "ZSTD"
    rows = pq.ParquetFile(str(w["staged"]).removeprefix("file://")).read().to_pylist()
    assert [(row["offset"], row["key"], row["value"], row["headers"]) for row in rows] == [
        (0, b"k0", b"v0", []), (1, b"k1", b"v1", [{"key": "h", "value": b"x"}]), (2, b"k2", b"v2", []),
    ]  # fmt: skip
    assert rows[0]["timestamp"] == datetime.fromtimestamp(FIRST_MS / 1000, UTC)


def test_a_retried_attempt_replaces_the_file(tmp_path: Path) -> None:
    r = Range("east.clicks", 0, 0, 4)
    (first,) = write(tmp_path, r, records(r.topic, 0, range(4), 1))
    (again,) = write(tmp_path, r, records(r.topic, 0, range(4), 1))
    assert first["staged"] == again["staged"]
    assert len(list(tmp_path.rglob("*.parquet"))) == 1
    assert pq.ParquetFile(str(again["staged"]).removeprefix("file://")).read().num_rows == 4


def test_a_range_without_records_writes_nothing(tmp_path: Path) -> None:
    assert write(tmp_path, Range("east.clicks", 0, 0, 10)) == []
    assert list(tmp_path.iterdir()) == []


def test_directory_values_are_escaped_as_hive_does() -> None:
    assert escape_path_name("a/b=c:d%e") == "a%2Fb%3Dc%3Ad%25e"
    assert directory_name("east.x", "east", date(2024, 3, 1).isoformat()) == (
        "topic=east.x/source_datacenter=east/event_date=2024-03-01"
    )
