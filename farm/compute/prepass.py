"""The escape pre-pass of ``max = "auto"`` on the render's device.

farm/plan/prepass.py finds each frame's iteration limit by iterating a coarse grid of
sampled frames in numpy, up to 2^18 steps; it was most of a default job's start-up (the
1080p minibrot zoom: 1.6 s of the 2.2 s to its first kernel on two CPU cores, 1.8-2.1 s
of 2.6-2.8 s on an H100 host; jobs/demo.toml: 2.1 s of 2.6 s on two cores; BENCHMARKS.md,
seventeenth session), and spreading its grids over processes cannot bring it under the
slowest grid's 0.8 s. :class:`DeviceRunner`
runs the same steps in kernels/prepass.cl, one work-item a point, from one of the
pre-pass's checks to the next (at most 11 launches a part), and leaves everything else
to the plan's own code: the points' first step, the loop from check to check and the
checks that stop a frame's grid, the counts and the statistic
(:func:`farm.plan.prepass.start`, :meth:`farm.plan.prepass.Run.loop`). The kernel's
arithmetic is numpy's operation for operation, so the limits are the ones `farm
validate` (numpy) prints, bit for bit (tests/test_prepass_device.py, on every OpenCL
device found).

It is a :class:`farm.plan.prepass.Runner` of width 1, on the render's first GPU, else
its first device (farm/run.py ``_prepass_device``): PoCL's CPU device runs it 5-10x
faster than numpy on two cores for most jobs (its compiler is checked on this kernel
before the device is chosen: farm/compute/kernelcheck.py). Where the device cannot (no
context was made for it, a build or a launch fails), it says nothing and the pre-pass
runs as before (``fallback``: the helper processes' runner, else in this process).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyopencl as cl

from farm.compute import clstart, programs
from farm.compute.events import wait_quietly
from farm.plan import prepass

GROUP = 64  # work-items a work-group


class DeviceRunner:
    """Iterates the pre-pass's grids on ``device``, on the context made for it beside
    the start (:func:`farm.compute.clstart.prepare_contexts`)."""

    width = 1

    def __init__(self, device: cl.Device, fallback: prepass.Runner | None = None):
        self.device, self.fallback = device, fallback
        self.used = False  # the device iterated the grids (tests, timing)

    def __call__(self, groups: list[list[prepass.Grid]], r2: float) -> list[list[int]]:
        try:
            out = [limits(self._queue(), group, r2) for group in groups]
            self.used = True
            return out
        except Exception:  # noqa: BLE001 - no device pre-pass: the plan's own, as before
            return [prepass.escape_limits(group, r2, self.fallback) for group in groups]

    def _queue(self) -> cl.CommandQueue:
        clstart.wait_contexts()
        handle = clstart.made_for(self.device)
        if handle is None:
            raise LookupError("no context was made for the device")
        return cl.CommandQueue(cl.Context.from_int_ptr(handle, retain=True), self.device)


def limits(queue: cl.CommandQueue, grids: Sequence[prepass.Grid], r2: float) -> list[int]:
    """:func:`farm.plan.prepass.escape_limits` of ``grids``, their steps on ``queue``'s
    device."""
    return [max(open_tail, prepass.quantile_count(escaped))
            for escaped, open_tail in iterate(queue, grids, r2)]


def iterate(queue: cl.CommandQueue, grids: Sequence[prepass.Grid], r2: float) -> list[tuple[np.ndarray, int]]:
    """:func:`farm.plan.prepass.iterate`, the steps between checks on the device."""
    program = programs.build(queue.context, ("prepass.cl",))
    kernels = {name: cl.Kernel(program, f"{name}_steps") for name in ("direct", "perturbed")}
    run = prepass.start(grids, r2)
    orbits = {}
    for p, _ in run.parts:
        joined = p.orbits()
        if joined is not None:
            orbits[id(p)] = [cl.Buffer(queue.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                                       hostbuf=np.ascontiguousarray(z)) for z in joined]
    run.loop(lambda p, n_from, n_to: _steps(queue, kernels[p.kind], p, orbits.get(id(p)), run,
                                            n_from, n_to, r2))
    return run.results()


def _steps(queue: cl.CommandQueue, kernel: cl.Kernel, points, orbit: list[cl.Buffer] | None,
           run: prepass.Run, n_from: int, n_to: int, r2: float) -> None:
    """Steps ``n_from + 1 .. n_to`` of ``points`` (a part of ``run``) on the device; the
    escapes counted in ``run`` and the points that stopped dropped, as the plan's loop
    does at each step."""
    ctx, mf = queue.context, cl.mem_flags
    count = points.f.shape[1]
    f = np.ascontiguousarray(points.f)
    f_buf = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=f)
    steps = np.zeros(count, np.int64)
    gone = np.zeros(count, np.uint8)
    steps_buf = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=steps)
    gone_buf = cl.Buffer(ctx, mf.WRITE_ONLY, gone.nbytes)
    scalars = (np.uint32(count), np.int64(n_from), np.int64(n_to), np.float64(r2))
    # one work-group size, whatever the points left: PoCL compiles a kernel anew for each
    # work-group size it is launched with
    sizes = ((-(-count // GROUP) * GROUP,), (GROUP,))
    if orbit is None:
        kernel(queue, *sizes, f_buf, steps_buf, gone_buf, *scalars)
        index = None
    else:
        index = np.ascontiguousarray(points.i[2:5])  # m, base, last
        index_buf = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=index)
        kernel(queue, *sizes, f_buf, index_buf, *orbit, steps_buf, gone_buf, *scalars)
        cl.enqueue_copy(queue, index, index_buf)
    cl.enqueue_copy(queue, f, f_buf)
    cl.enqueue_copy(queue, steps, steps_buf)
    wait_quietly([cl.enqueue_copy(queue, gone, gone_buf, is_blocking=False)])
    points.f = f
    if index is not None:
        points.i[2] = index[0]
    escaped = gone == 1
    if escaped.any():
        ids = points.pid[escaped]
        run.count[ids] = steps[escaped]
        run.escaped += np.bincount(run.owner[ids], minlength=run.grids)
    points.keep(gone == 0)
