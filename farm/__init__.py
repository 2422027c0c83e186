"""zoomfarm: a render farm for deep-zoom Mandelbrot animations.

Data flow: job spec (farm.spec) -> plan (farm.plan) -> schedule (farm.schedule)
-> compute (farm.compute, kernels/*.cl) -> store (farm.store) -> colour
(farm.color) -> encode (farm.encode). The command line is farm.cli.
"""

import os
import sys

__version__ = "0.1.0"

# Centres have as many digits as their depth (100,000 at 1e-100000), and mpmath 1.3
# parses a decimal string through int(), which Python limits to 4300 digits (a guard
# for services parsing untrusted input; a job file is the user's own). Every process
# of the farm imports this package: the command, MPI ranks, frame preparation's
# helpers (a 1e-10000 zoom's first frames failed in them on mpmath 1.3).
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)

# numpy's OpenBLAS starts a thread per core when numpy is imported (0.06 CPU s on the
# 2-core machine, more on a 16-core host) and the farm multiplies no matrices: one
# thread, unless the user says otherwise. Read when numpy is first imported, so only
# where this package comes first (the `farm` command and its processes do).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
