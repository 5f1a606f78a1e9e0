"""The producer: settings, the record accumulator, the sender, the partitioner and idempotence."""
