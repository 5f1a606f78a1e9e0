"""Talking to brokers: one pipelined connection, the cluster (metadata cache, connection pool,
coordinators), ApiVersions negotiation and the client's picture of a cluster.

``versions`` and ``metadata`` are sans-IO and shared with the blocking fetcher, so this
``__init__`` imports nothing: importing the package must not pull in trio.
"""
