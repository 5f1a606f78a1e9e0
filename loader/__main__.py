"""``python -m tributary.loader`` / ``spark-submit .../loader/__main__.py``: the same load as ``tributary load``."""

from __future__ import annotations

import argparse
import sys

from tributary.loader.main import PROG, run
from tributary.loader.options import add_arguments


def main() -> int:
    parser = argparse.ArgumentParser(prog=PROG, description="Load the aggregate cluster into Hadoop, exactly once.")
    add_arguments(parser)
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
