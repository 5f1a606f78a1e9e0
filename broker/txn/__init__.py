"""The transaction coordinator (KIP-98): transactional ids, their state in ``__transaction_state``,
and the markers that end transactions in every partition they wrote to.

Sans-IO at the core, trio at the edge, as ``broker.group``:

- ``placement``: which ``__transaction_state`` partition (so which broker) owns a transactional id;
- ``state``: one id's state and Kafka's transitions (prepare, write, complete);
- ``records``: the key and value formats of ``__transaction_state`` (Kafka's);
- ``messages``: inputs, results and effects of the state machine;
- ``coordinator``: the state machine for every id this broker coordinates;
- ``storage``, ``topic``, ``markers``, ``service``: the log, the topic, WriteTxnMarkers, and the
  trio driver.
"""

# The sans-IO core only: importing the package (broker.config does, for TxnConfig) must not
# pull in trio and the cluster code; the driver is ``broker.txn.service``.
from tributary.broker.txn.config import TxnConfig
from tributary.broker.txn.placement import TRANSACTION_STATE_TOPIC, partition_for

__all__ = ["TRANSACTION_STATE_TOPIC", "TxnConfig", "partition_for"]
