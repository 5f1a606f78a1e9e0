"""Raw record batches for the mirror: fetch them as bytes and produce them unchanged.

``batches`` is sans-IO and shared with the blocking fetcher, so this ``__init__`` imports
nothing: importing the package must not pull in trio.
"""
