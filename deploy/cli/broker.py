"""``tributary broker``: run one broker until SIGTERM or Ctrl-C.

    tributary broker --id N --listen HOST:PORT --data-dir DIR --zookeeper HOST:PORT[/chroot]
                     [--advertise HOST:PORT] [--datacenter NAME] [--config FILE.toml]
                     [--metrics-port N] [--metrics-host HOST]

Every flag is also a key of the TOML file; a flag wins over the file. The
metrics flags are the keys ``metrics.port`` and ``metrics.host`` (a ``[metrics]``
table).
"""

from __future__ import annotations

import argparse
import logging
import resource
import signal
import sys
from pathlib import Path
from typing import Any

import trio

from tributary.broker import server
from tributary.broker.cluster.errors import ClusterError
from tributary.broker.config import ConfigError, load
from tributary.deploy.errors import operator_errors

log = logging.getLogger("tributary.broker")


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "broker",
        help="run a Kafka-compatible broker",
        description="Run a Kafka-compatible broker. Every flag is also a key of the TOML config file; "
        "a flag wins over the file. Broker settings use Kafka's names (log.retention.ms, num.partitions, ...).",
    )
    parser.add_argument("--id", type=int, help="broker id, unique in the cluster")
    parser.add_argument("--listen", metavar="HOST:PORT", help="address to accept clients on")
    parser.add_argument("--data-dir", metavar="DIR", help="directory holding the partition logs")
    parser.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]", help="the cluster's ZooKeeper ensemble")
    parser.add_argument("--advertise", metavar="HOST:PORT", help="address clients should use (default: --listen)")
    parser.add_argument("--datacenter", metavar="NAME", help="datacenter this broker runs in")
    parser.add_argument("--config", metavar="FILE.toml", type=Path, help="TOML file with any of these settings")
    parser.add_argument(
        "--metrics-port",
        metavar="N",
        type=int,
        help="serve Prometheus metrics on http://HOST:N/metrics (TOML metrics.port; 0: any free port, logged; "
        "default: no endpoint)",
    )
    parser.add_argument(
        "--metrics-host",
        metavar="HOST",
        help="address of the metrics endpoint (TOML metrics.host; default: 127.0.0.1)",
    )
    parser.set_defaults(func=run)


async def _serve_until_signalled(config: Any) -> None:
    stop = trio.Event()
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def watch_signals() -> None:
                async for signum in signals:
                    name = signal.Signals(signum).name
                    if not stop.is_set():
                        log.info("received %s: handing over leadership, draining and shutting down", name)
                        stop.set()
                    else:
                        log.info("received %s again: stopping now", name)
                        nursery.cancel_scope.cancel()

            nursery.start_soon(watch_signals)
            # Returns once the broker has handed over, drained and closed its logs.
            await server.run(config, stop=stop)
            nursery.cancel_scope.cancel()


def _raise_open_file_limit() -> None:
    """Each segment holds three descriptors and each client one: lift the soft
    limit to the hard one, as Kafka's packaging does with LimitNOFILE."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d: %s", soft, exc)


def run(args: argparse.Namespace) -> int:
    flags = {
        "id": args.id,
        "listen": args.listen,
        "data-dir": args.data_dir,
        "zookeeper": args.zookeeper,
        "advertise": args.advertise,
        "datacenter": args.datacenter,
        "metrics.port": args.metrics_port,
        "metrics.host": args.metrics_host,
    }
    try:
        config = load(flags, args.config)
    except ConfigError as exc:
        print(f"tributary broker: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    _raise_open_file_limit()
    try:
        trio.run(_serve_until_signalled, config)
    except (OSError, ClusterError, BaseExceptionGroup) as exc:
        # Start-up failures (address in use, ZooKeeper unreachable, broker id
        # taken) get one line each; anything else is a bug and keeps its traceback.
        errors = operator_errors(exc, (OSError, ClusterError))
        if errors is None:
            raise
        for error in errors:
            print(f"tributary broker: {error}", file=sys.stderr)
        return 1
    log.info("broker %d stopped", config.broker_id)
    return 0
