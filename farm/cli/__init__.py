"""The ``farm`` command (also ``python -m farm``).

Every error a user can cause ends with one line ``farm: <what is wrong>`` on
stderr and the exit status of :mod:`farm.errors` (2 for bad input), no traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from farm.cli.commands import COMMANDS
from farm.cli.parser import build_parser
from farm.errors import EXIT_INTERRUPTED, FarmError
from farm.runtime.cores import launcher_rank

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status = COMMANDS[args.command](args)
    except FarmError as err:
        if not (err.exit_status == 2 and launcher_rank() not in (None, 0)):
            print(f"farm: {err}", file=sys.stderr)  # bad input: every rank reads it; rank 0 says so
        status = err.exit_status
    except KeyboardInterrupt:
        print("farm: interrupted", file=sys.stderr)
        status = EXIT_INTERRUPTED
    except BrokenPipeError:  # `farm ... | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 0
    if "mpi4py.MPI" in sys.modules:  # under MPI: every rank takes the master's status
        from farm.schedule.transport import leave

        status = leave(status)
    render = sys.modules.get("farm.compute.render")
    if render is not None and render.kernels_abandoned():  # a stop left kernels running
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)  # without the OpenCL drivers' teardown, which would wait for them
    return status
