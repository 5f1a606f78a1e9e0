"""The mirror daemon: consumes a source cluster and produces raw batches into the
aggregate cluster, renaming topics to ``<alias>.<topic>``.

May import: client, protocol, trio.
"""
