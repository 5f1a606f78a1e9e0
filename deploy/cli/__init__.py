"""The ``tributary`` command: one module per subcommand, registered in ``main``.

Subcommands parse options and print; the work they start lives in the packages they call
(``tributary.broker``, ``tributary.mirror``, ``tributary.loader``, ``..appliance``).
"""
