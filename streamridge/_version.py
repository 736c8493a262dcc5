"""The version of streamridge (one place: the package, its files and the command line read it here)."""

__version__ = "0.1.0"
