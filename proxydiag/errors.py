"""The proxydiag exception tree.

Every error a user can see is one line that names the place (file and line or byte
offset, run id, server URI) and says what to do. The CLI prints ``str(error)`` and
exits 2; it never shows a traceback for these.

::

    ProxydiagError
     ├── IngestError          a source could not be read (names file:line or file@offset)
     │    ├── UnknownFormatError   nothing recognises the source
     │    └── NoPointsError        a known format holding no metric points (yet)
     ├── FrameError           a frame broke the canonical schema (a bug in a reader)
     ├── StoreError           the store is missing, corrupt or in use
     │    └── StoreLockedError     another process holds the writer lock
     ├── ConfigError          a TOML config / alias file is invalid
     ├── AnalysisError        an analysis cannot run on these runs (e.g. no common metric)
     ├── MlflowError          a tracking server is down, refuses, or a run is missing
     ├── PluginError          an unknown plug-in name, or a registered plug-in that does not import
     └── MissingExtraError    an optional dependency is not installed (says which extra)

Warnings about partial data (truncated files, CRC mismatches) are
:class:`IngestWarning`, emitted with :func:`warnings.warn`; they never stop a read.
"""

from __future__ import annotations


class ProxydiagError(Exception):
    """Root of every error proxydiag raises on purpose."""


class IngestError(ProxydiagError):
    """A source could not be read; the message names the file and line or offset."""


class UnknownFormatError(IngestError):
    """No reader recognises the source."""


class NoPointsError(IngestError):
    """The source is of a known format but holds no metric points (yet)."""


class FrameError(ProxydiagError):
    """A frame does not follow the canonical schema."""


class StoreError(ProxydiagError):
    """The store is missing, unreadable, or a run is not in it."""


class StoreLockedError(StoreError):
    """Another process holds the store's writer lock."""


class ConfigError(ProxydiagError):
    """A configuration or alias file is invalid."""


class AnalysisError(ProxydiagError):
    """An analysis cannot run on the given runs."""


class MlflowError(ProxydiagError):
    """An MLflow tracking server or store could not be used."""


class PluginError(ProxydiagError):
    """A registry was asked for a plug-in it does not have, or one that does not import."""


class LabError(ProxydiagError):
    """A lab run failed (the suite's other runs are kept)."""


class MissingExtraError(ProxydiagError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"{package} is not installed; install it with: pip install 'proxydiag[{extra}]'"
        )


class IngestWarning(UserWarning):
    """Partial data: a reader kept what was intact and skipped the damage."""


def where(path: object, line: int | None = None, *, offset: int | None = None) -> str:
    """Format a place for a message: ``file:line`` or ``file@byte``.

    >>> where("m.csv", 418)
    'm.csv:418'
    >>> where("events.out", offset=1024)
    'events.out@1024'
    """
    text = str(path)
    if line is not None:
        return f"{text}:{line}"
    if offset is not None:
        return f"{text}@{offset}"
    return text
