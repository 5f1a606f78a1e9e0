"""Create a broker's ZooKeeper chroot, and its parents, if missing (the broker's ExecStartPre).

    tributary-zookeeper-chroot.py HOST:PORT[,HOST:PORT...]/chroot

The broker expects its chroot to exist, as `tributary up` makes it; on a deployed host this
runs before every broker start, with the virtualenv's Python (kazoo is a dependency). It is
idempotent; a connect string without a chroot needs nothing. An unreachable ensemble is one
line on stderr and exit status 1, so systemd retries the start later.
"""

from __future__ import annotations

import logging
import sys

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

TIMEOUT = 30.0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: tributary-zookeeper-chroot.py HOST:PORT[,...]/chroot", file=sys.stderr)
        return 2
    # kazoo logs every failed connection attempt; the one line below says what matters.
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    servers, _, chroot = argv[0].partition("/")
    if not chroot:
        return 0
    client = KazooClient(hosts=servers, timeout=10.0)
    try:
        client.start(timeout=TIMEOUT)
        client.ensure_path(f"/{chroot}")
        client.stop()
    except (KazooException, KazooTimeoutError, OSError) as exc:
        print(
            f"tributary-zookeeper-chroot: cannot create /{chroot} on {servers}: {exc or type(exc).__name__}",
            file=sys.stderr,
        )
        return 1
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
