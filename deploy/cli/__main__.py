"""``python -m tributary.deploy.cli``: the ``tributary`` command (how the appliance starts its children)."""

import sys

from tributary.deploy.cli.main import main

sys.exit(main())
