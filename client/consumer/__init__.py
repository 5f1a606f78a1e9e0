"""The consumer: settings, subscription and positions, the fetcher, the records it hands out, and
its side of a rebalance."""
