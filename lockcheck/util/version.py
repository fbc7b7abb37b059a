"""The version of lockcheck: one place, read by `lockcheck.__version__` and every report that prints it."""

__version__ = "0.1.0"
