"""Launches a stop abandoned while their kernels still run on a device.

A renderer that closes with launches in flight (farm/compute/render.py,
``TileRenderer.close``) hands them here, with itself (:func:`abandon`): freeing them
at once would wait for their kernels, which may run for minutes, with the interpreter
lock held. A daemon thread keeps them alive until their commands are complete,
waiting in clWaitForEvents with the lock released; :func:`kernels_abandoned` tells
the command line (farm/cli) that the process must then end without the OpenCL
drivers' teardown.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import threading

import pyopencl as cl

from farm.compute.slots import Launch

_abandoned: queue.SimpleQueue = queue.SimpleQueue()
_waiting = [0]  # abandoned batches whose commands may still run
_waiting_lock = threading.Lock()


def _reap() -> None:
    """Keeps abandoned launches (and their renderer) alive until their commands are
    complete, waiting in clWaitForEvents with the interpreter lock released, then lets
    them go. A daemon thread: a process that ends while it waits ends without the
    drivers' teardown (:func:`kernels_abandoned`, farm/cli)."""
    while True:
        owner, launches = _abandoned.get()
        events = [e for launch in launches for e in (*launch.events, *launch.readbacks)]
        with contextlib.suppress(Exception):  # a device error: the objects can go all the same
            cl.wait_for_events(events)
        del owner, launches, events
        with _waiting_lock:
            _waiting[0] -= 1


def kernels_abandoned() -> bool:
    """Whether commands a stop abandoned may still run on a device: the process must then
    end with os._exit, since an OpenCL driver's teardown at exit would wait for them (or,
    PoCL, abort the process)."""
    return _waiting[0] > 0


@functools.cache
def _reaper() -> threading.Thread:
    thread = threading.Thread(target=_reap, name="farm-reaper", daemon=True)
    thread.start()
    return thread


def abandon(owner: object, launches: list[Launch]) -> None:
    """Keep ``launches`` and ``owner`` (their renderer, whose context they need) alive
    until the device is done with them, on the reaper's thread."""
    _reaper()
    with _waiting_lock:
        _waiting[0] += 1
    _abandoned.put((owner, launches))
