"""The topology file, config rendering, the local launcher and the ``tributary`` command.

May import every other package.
"""
