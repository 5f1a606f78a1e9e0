"""The log cleaner: compaction of logs whose ``cleanup.policy`` names compact (docs/compaction.md).

- :mod:`.config`: the broker's ``log.cleaner.*`` settings.
- :mod:`.plan`: which log to clean and how far, sans-IO (dirty ratio, compaction lags, groups
  of segments).
- :mod:`.offset_map`: the latest offset of each key of the dirty part, in bounded memory.
- :mod:`.transactions`: which transactional batches were aborted and which markers may go,
  read from the markers in the log.
- :mod:`.filter`: what stays of one batch (Kafka's retention rules), sans-IO.
- :mod:`.clean`: one clean of one log's files, run off the broker's event loop.
- :mod:`.throttle`: ``log.cleaner.io.max.bytes.per.second``.
- :mod:`.service`: the broker's cleaner threads and the ``cleaner-offset-checkpoint``.

Nothing here is imported by the log itself: the cleaner works on a log from outside, and the
log only offers the atomic swap of cleaned segments (:mod:`tributary.broker.log.swap`).
"""
