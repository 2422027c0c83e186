"""The GPU colourer of `farm encode`, begun as the command starts.

On a GPU machine the colourer's OpenCL start (the drivers' platforms, a context, the
colouring kernel from the build cache: 0.23-0.34 s on 16-core H100 hosts) came after
the store was open and the encoders started, on the way to the first frame, while
every core waited. :func:`begin_colourer` starts it beside the command's imports and
the store instead: the platforms are found and the context made through
farm/compute/clstart.py, which lets go of the interpreter's lock, and the sink then
takes the colourer made (farm/compute/color.py makes one a process and waits for one
being made). Nothing is decided here: where this fails, the sink makes its colourer as
before and reports what went wrong.
"""

from __future__ import annotations

import os
import threading

from farm.compute.nodes import gpu_possible

# the OpenCL device each kernel engine colours on: ``auto`` a GPU, ``opencl`` a GPU, else
# PoCL's CPU device (farm/compute/color.py, gpu_colourer's selector)
SELECTORS = {"auto": "gpu", "opencl": "auto"}


def colour_engine(engine: str = "auto") -> str:
    """The engine a video is coloured with, as :func:`farm.encode.sink.default_colourer`
    and :func:`begin_colourer` both decide it: ``auto`` takes FARM_COLOR_ENGINE, and is
    ``numpy`` where no GPU device node exists (OpenCL's start-up, 0.2-0.5 s, skipped);
    any other value is returned as given (the sink refuses what it does not know)."""
    if engine == "auto":
        engine = os.environ.get("FARM_COLOR_ENGINE", "auto")
    if engine == "auto" and not gpu_possible():
        return "numpy"
    return engine


def begin_colourer() -> threading.Thread | None:
    """Start making the GPU colourer that :func:`farm.encode.sink.default_colourer` will
    return, on a daemon thread (returned: join it before the command exits, so that no
    OpenCL call is left running); None where the sink colours with numpy (no GPU device
    node, or FARM_COLOR_ENGINE=numpy)."""
    selector = SELECTORS.get(colour_engine())
    if selector is None:
        return None
    try:
        from farm.compute import clstart

        clstart.begin()  # pyopencl, then the drivers' platforms on a thread of their own
    except Exception:  # noqa: BLE001 - no OpenCL to start: the sink finds out and says so
        return None

    def make() -> None:
        try:
            from farm.compute.color import gpu_colourer

            gpu_colourer(selector=selector)
        except Exception:  # noqa: BLE001 - the sink's own call reports it, as before
            pass

    thread = threading.Thread(target=make, name="farm-colourer", daemon=True)
    thread.start()
    return thread
