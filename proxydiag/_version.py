"""The package version (one place; ``proxydiag.__version__`` re-exports it)."""

__version__ = "0.1.0"
