"""Trio Kafka client: connections, metadata, producer, consumer with groups, admin,
raw-batch fetch/produce for the mirror, and a blocking fetcher for Spark executors.

May import: protocol, trio (see ../shared/DESIGN.md and the import-linter contracts).
"""
