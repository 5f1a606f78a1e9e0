"""The topology file, the local launcher (``appliance/``) and the ``tributary`` command (``cli/``).

May import every other package.
"""
