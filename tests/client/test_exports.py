"""The client package's public names, imported lazily so that the blocking fetcher stays trio-free."""

from __future__ import annotations

from tributary import client


def test_every_exported_name_resolves() -> None:
    assert sorted(client.__all__) == sorted(client._EXPORTS)
    for name in client.__all__:
        value = getattr(client, name)
        assert getattr(value, "__name__", name) == name or name in ("EARLIEST", "LATEST")
