"""The columns of the loaded records, for Spark and for Arrow (they must match exactly:
mapInArrow refuses batches whose Arrow types differ from the declared Spark types)."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T

#: The warehouse is partitioned by these, in this order (they become directories).
PARTITION_COLUMNS = ("topic", "source_datacenter", "event_date")

HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])

ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", pa.list_(HEADER)),
        ("source_datacenter", pa.string()),
        ("source_topic", pa.string()),
        ("event_date", pa.date32()),
    ]
)

SPARK_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("timestamp", T.TimestampType()),
        T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()),
        T.StructField(
            "headers",
            T.ArrayType(T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())])),
        ),
        T.StructField("source_datacenter", T.StringType()),
        T.StructField("source_topic", T.StringType()),
        T.StructField("event_date", T.DateType()),
    ]
)

#: One row per planned range: the input of the read tasks.
RANGE_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("start", T.LongType(), False),
        T.StructField("end", T.LongType(), False),
    ]
)
