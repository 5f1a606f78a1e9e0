"""The one thing pyproject.toml cannot say without setuptools' experimental ``ext-modules`` table:
the per-record loops of the record format, compiled (protocol/records/_speedups.c). Optional:
without a C compiler and Python's headers the install goes on, and the pure-Python loops run
(protocol/records/compiled.py; docs/benchmarks.md, "Compiled record loops"). Everything else
about the package is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tributary.protocol.records._speedups",
            sources=["protocol/records/_speedups.c"],
            optional=True,
        )
    ]
)
