"""OpenCL sources from the installed package, and programs built once per context.

The ``.cl`` files live in ``kernels/`` at the top of the source tree and are
installed as the package ``farm.kernels``; they are read with importlib.resources,
so a non-editable install works from any directory. A source checkout that is on
``PYTHONPATH`` without being installed falls back to ``<checkout>/kernels``.

A program is the format file followed by the shared driver (``mandel.cl``) or by
the format's own test kernels. pyopencl keeps compiled binaries in its on-disk
cache; this module keeps built programs per (context, sources, options).
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings
import weakref
from importlib import resources
from pathlib import Path

import pyopencl as cl

from farm.errors import DeviceError
from farm.runtime.cache import log_build

FORMAT_SOURCES = {"f64": "f64.cl", "fp128": "fp128.cl", "quad-single": "qs.cl",
                  "perturb": "perturb.cl"}


@functools.cache
def source(name: str) -> str:
    """Text of ``kernels/<name>``."""
    try:
        return resources.files("farm.kernels").joinpath(name).read_text(encoding="utf-8")
    except ModuleNotFoundError:
        path = Path(__file__).resolve().parents[2] / "kernels" / name
        return path.read_text(encoding="utf-8")


# Programs built, per context, while something still holds them: weak values, because a
# program holds its context, and a strong cache kept every context (and its device
# memory) alive for the life of the process: the GPU test suite ran out of memory.
_built: weakref.WeakValueDictionary[tuple[int, tuple[str, ...], str], cl.Program] = (
    weakref.WeakValueDictionary())


def build(ctx: cl.Context, names: tuple[str, ...], options: tuple[str, ...] = ()) -> cl.Program:
    """Build the concatenation of ``names`` (cached per context while it is in use)."""
    opts = " ".join(options)
    key = (ctx.int_ptr, names, opts)
    program = _built.get(key)
    if program is None:
        text = "\n".join(f'#line 1 "{n}"\n' + source(n) for n in names)
        try:
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always", cl.CompilerWarning)
                program = cl.Program(ctx, text).build(options=opts)
        except cl.RuntimeError as err:
            raise DeviceError(f"building {'+'.join(names)} failed:\n{err}") from None
        if any(issubclass(w.category, cl.CompilerWarning) for w in said):
            _log_build(program, names, opts)
        _built[key] = program
    return program


def _log_build(program: cl.Program, names: tuple[str, ...], opts: str) -> None:
    """A build's compiler output (the warnings of a build that worked) into the build log."""
    with contextlib.suppress(cl.Error):
        log_build(f"{'+'.join(names)} {opts}",
                  [(d.name.strip(), program.get_build_info(d, cl.program_build_info.LOG).strip())
                   for d in program.devices])


def device_options(device: cl.Device, local_bins: int) -> tuple[str, ...]:
    """Build options on ``device``: -DHIST64 when 64-bit atomics exist, -DFP128_PTX on
    NVIDIA's platform (inline PTX carry chains; FARM_NO_PTX=1 turns them off), the
    local sub-histogram size (at most a quarter of the device's local memory), and any
    options in FARM_CL_OPTIONS (for benchmarking kernel variants, e.g.
    FARM_CL_OPTIONS=-DQS_REFERENCE_LOOP)."""
    opts = []
    if "cl_khr_int64_base_atomics" in device.extensions.split():
        opts.append("-DHIST64")
    if "NVIDIA" in device.platform.name and os.environ.get("FARM_NO_PTX", "") in ("", "0"):
        opts.append("-DFP128_PTX")
    fits = device.local_mem_size // 16
    opts.append(f"-DLOCAL_BINS={max(16, min(local_bins, fits))}")
    opts.extend(os.environ.get("FARM_CL_OPTIONS", "").split())
    return tuple(opts)
