"""One error tree for the whole package.

Every error a user can cause or meet is a :class:`FarmError`. The command line
prints ``farm: <message>`` (one line, no traceback) and exits with the error's
``exit_status``:

====  ==========================================================================
 0    success
 1    the render failed (no worker left, a tile failed on every attempt, no
      OpenCL device, ...): :class:`RenderFailed`, :class:`DeviceError`
 2    bad input (spec, path, option, store that does not match): nothing was
      written: :class:`SpecError`, :class:`UsageError`, :class:`StoreError`
75    interrupted by a signal (SIGTERM, SIGINT, SIGUSR1); the store holds every
      finished tile, ``farm resume STORE`` continues: :class:`Interrupted`
====  ==========================================================================

75 is ``EX_TEMPFAIL`` from ``sysexits.h``: "try again later".
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 75


class FarmError(Exception):
    """Base of every error the farm reports to a user."""

    exit_status = EXIT_FAILED


class UsageError(FarmError):
    """A bad command-line option or path."""

    exit_status = EXIT_USAGE


class SpecError(UsageError):
    """A job spec that cannot be rendered: the message names the field."""

    def __init__(self, field: str, message: str, source: str | None = None):
        self.field = field
        self.message = message
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{field}: {message}")


class StoreError(UsageError):
    """A store that is missing, unreadable, or does not match the job."""


class DeviceError(FarmError):
    """No usable OpenCL device, or the device lacks a required feature."""


class RenderFailed(FarmError):
    """The render could not finish; finished tiles are saved."""


class Interrupted(FarmError):
    """A signal stopped the render; finished tiles are saved."""

    exit_status = EXIT_INTERRUPTED
