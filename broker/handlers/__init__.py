"""One module per Kafka API; each exposes ``async def handle(ctx, request)``.

A handler returns the response message, or None when the protocol says no
response is sent (Produce with acks=0). The table that routes requests to them,
and decides what the broker advertises, is :mod:`tributary.broker.dispatch`.
"""
