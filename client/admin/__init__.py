"""Admin operations: topics, configs, cluster description, offsets and consumer groups."""
