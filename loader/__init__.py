"""The PySpark loader that drains the aggregate cluster into Hadoop exactly once.

May import: client (the blocking fetcher), protocol, pyspark, pyarrow.
"""
