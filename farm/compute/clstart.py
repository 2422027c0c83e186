"""OpenCL's own start-up on a thread of its own, beside the render's start-up.

pyopencl keeps the interpreter's lock while OpenCL finds its platforms (the ICD loader
loads every vendor's driver, and NVIDIA's initialises the GPUs: about 0.12 s on a
16-core H200 host) and while it makes a context (about 0.14 s there): a Python thread
beside them ran at 3-4% of its rate (BENCHMARKS.md, start-up), so nothing of the farm's
overlapped them. The same two calls made through ctypes, which lets go of the lock,
run beside the farm's imports and its reference orbit instead:

* :func:`begin` (``farm render`` and ``farm resume``, before they import the farm's
  modules) imports pyopencl, then asks its ICD loader for the platforms and their
  devices on a daemon thread; :func:`wait_platforms` (farm/compute/inventory.py, before
  pyopencl asks the same) waits for it, so the loader starts once, on that thread.
  (pyopencl first: its wheel's loader finds the wheel's PoCL only as pyopencl sets it
  up, and crashed when asked before that.)
* :func:`prepare_contexts` (once a render knows its devices) makes their contexts on
  another thread; :func:`context` gives a renderer its device's context from there,
  or makes one with pyopencl when there is none (not asked, or the call failed).

Nothing here decides anything: which devices a render uses is device.py's choice as
before, and a failure here only means pyopencl does the same work later, as it did.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading
from typing import Any

CL_SUCCESS = 0
CL_DEVICE_TYPE_ALL = 0xFFFFFFFF

_lock = threading.Lock()
_started = False
_platforms_done = threading.Event()
_platforms_done.set()  # nothing to wait for until begin() starts the thread
_contexts: dict[int, int] = {}  # cl_device_id -> cl_context made by prepare_contexts
_contexts_done = threading.Event()
_contexts_done.set()


def _loaded_loader() -> str | None:
    """The ICD loader this process has mapped (pyopencl's, once it is imported)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if "libOpenCL" in os.path.basename(path):
                    return path
    except OSError:
        pass
    return None


def _library(path: str | None) -> Any:
    if not path:
        return None
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    lib.clGetPlatformIDs.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32)]
    lib.clGetDeviceIDs.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_void_p,
                                   ctypes.POINTER(ctypes.c_uint32)]
    lib.clCreateContext.restype = ctypes.c_void_p
    lib.clCreateContext.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_void_p),
                                    ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32)]
    lib.clReleaseContext.argtypes = [ctypes.c_void_p]
    return lib


def _discover(path: str | None) -> None:
    """Every platform's devices, as pyopencl's get_platforms and get_devices ask."""
    try:
        lib = _library(path)
        if lib is None:
            return
        count = ctypes.c_uint32()
        if lib.clGetPlatformIDs(0, None, ctypes.byref(count)) != CL_SUCCESS or not count.value:
            return
        ids = (ctypes.c_void_p * count.value)()
        if lib.clGetPlatformIDs(count.value, ids, None) != CL_SUCCESS:
            return
        for platform in ids:
            lib.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, None, ctypes.byref(count))
    finally:
        _platforms_done.set()


def begin() -> None:
    """Start the OpenCL platforms' discovery on a daemon thread (once; when a render
    starts, before the rest of its imports)."""
    global _started
    with _lock:
        if _started:
            return
        _started = True
        _platforms_done.clear()
    try:
        import pyopencl  # noqa: F401  (its ICD loader, as pyopencl sets it up: see the docstring)

        atexit.register(_settle)
        threading.Thread(target=_discover, args=(_loaded_loader(),), name="farm-cl-platforms",
                         daemon=True).start()
    except BaseException:
        _platforms_done.set()  # nobody waits for a discovery that never began
        raise


def _settle() -> None:
    """At exit: let a driver call in progress end before the drivers' own teardown
    (a command that stopped early, on bad input, while the thread was still in it)."""
    _platforms_done.wait(10)
    _contexts_done.wait(10)


def wait_platforms() -> None:
    """Return once :func:`begin`'s discovery is over (at once if it never began)."""
    _platforms_done.wait()


def _make_contexts(path: str | None, devices: list[int]) -> None:
    try:
        lib = _library(path)
        if lib is None:
            return
        for dev in devices:
            err = ctypes.c_int32()
            handle = ctypes.c_void_p(dev)
            ctx = lib.clCreateContext(None, 1, ctypes.byref(handle), None, None, ctypes.byref(err))
            if err.value == CL_SUCCESS and ctx:
                with _lock:
                    _contexts[dev] = ctx
    finally:
        _contexts_done.set()


def prepare_contexts(devices: list[Any]) -> None:
    """Make a context for each of these pyopencl devices on a daemon thread, through
    the ICD loader pyopencl itself uses (so that pyopencl can take them over)."""
    _contexts_done.wait()  # one such thread at a time, and its contexts counted below
    with _lock:
        wanted = sorted({d.int_ptr for d in devices} - set(_contexts))
    path = _loaded_loader()
    if not wanted or path is None:
        return
    _contexts_done.clear()
    threading.Thread(target=_make_contexts, args=(path, wanted), name="farm-cl-contexts",
                     daemon=True).start()


def wait_contexts() -> None:
    """Return once :func:`prepare_contexts`' thread is done (at once if none runs)."""
    _contexts_done.wait()


def made_for(device: Any) -> int | None:
    """The context made for ``device`` and not yet given (its cl_context), or None."""
    with _lock:
        return _contexts.get(device.int_ptr)


def context(device: Any) -> Any:
    """A pyopencl Context on ``device``: the one :func:`prepare_contexts` made for it
    (each is given once), else a new one."""
    import pyopencl as cl

    _contexts_done.wait()
    with _lock:
        made = _contexts.pop(device.int_ptr, None)
    if made is not None:
        return cl.Context.from_int_ptr(made, retain=False)
    return cl.Context([device])


def release_unused() -> None:
    """Release the contexts made and never taken (a render that stopped before its
    renderers were made)."""
    _contexts_done.wait()
    with _lock:
        left = list(_contexts.values())
        _contexts.clear()
    lib = _library(_loaded_loader()) if left else None
    if lib is not None:
        for ctx in left:
            lib.clReleaseContext(ctypes.c_void_p(ctx))
