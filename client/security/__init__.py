"""The client's side of Kafka's security: TLS and SASL with Kafka's client setting names.

:mod:`~client.security.settings` reads them (``security.protocol``, ``sasl.mechanism``, ...)
from a mapping, a ``--command-config`` file or a TOML table; :mod:`~client.security.login`
drives the SASL exchange sans-IO, for the Trio connection and the blocking fetcher alike. No
trio here: Spark executors use it.
"""
