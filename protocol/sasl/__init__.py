"""SASL mechanisms as Kafka uses them: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, 7677).

Sans-IO, like the rest of the package: tokens in, tokens out. Both sides live here because
both ends of a connection in this project need them and may not import each other: the
broker authenticates clients (server side) and its replica fetchers authenticate to other
brokers (client side); the client package authenticates the mirror, the loader and the CLI.
"""
