"""Per-frame host work, built ahead of need and shared by every renderer of a process:
coordinate axes (direct formats: a turned frame's four terms, farm/numerics/axes.py)
or a perturbed frame's arguments (reference offset, half spacing, rotation, skip table:
farm/compute/perturbation.py).

:class:`FramePrep` builds each frame once and keeps the ``KEEP`` most recent. The work
runs on threads of its own (one per worker: with two GPUs frames are used twice as
fast), or in helper processes (``processes``; GPUs, LaunchConfig.prep_processes). A
skip table is 3-15 ms of numpy calls a frame, and on a thread every one of those calls
also waits for the interpreter's lock that the worker loop, the master and the store
writer take: in a 30-frame 1080p zoom on an H200 a preparation took 18-24 ms on its
thread against 4-15 ms alone, and the GPU, 13 ms a frame, waited for it (BENCHMARKS.md,
"The whole job on the GPU"). A helper process has an interpreter of its own: a fresh
``python -m farm.compute.prep`` (no OpenCL, MPI or thread state is copied) that gets
the plan and references once and sends each frame's state back pickled (a skip table
of an 8007-step orbit: 1.2 MB). It starts when the FramePrep is made, beside the
renderer's own set-up, and builds the same bytes a thread would (tests/test_prep.py).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import math
import os
import pickle
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import farm.numerics as num
from farm.compute.perturbation import MapsCache, PerturbedFrame, perturbed_frame
from farm.numerics.axes import encode_exact, exact_axis, rotated_axes, sample_axis
from farm.numerics.bla import device_layout
from farm.plan import FramePlan, Plan, prepass
from farm.plan import samples as sample_pattern
from farm.plan.reference_types import References
from farm.plan.units import CENTRE, scaled
from farm.runtime import pipes


class FrameBuilder:
    """Builds one frame's host state (see the module's docstring); not thread-safe by
    itself but for its maps cache, which is."""

    def __init__(self, plan: Plan, references: References | None, skipping: bool = True,
                 interior: bool = True, high_degree: bool = True):
        self.plan, self.references, self.skipping = plan, references, skipping
        self.interior, self.high_degree = interior, high_degree
        self._maps = MapsCache()  # each reference's skip maps, for all its frames

    def build(self, frame: FramePlan) -> Any:
        if self.plan.layout is not None:
            return self._unit(frame)
        if frame.precision == "perturb":
            return self._perturbation(frame)
        return self._axes(frame)

    def _unit(self, unit: FramePlan) -> Any:
        """An expmap unit's state: a segment's skip table (its |dc| reaches its outer
        radius; its h_m, h_e are not used), or the centre image's perturbation state or
        coordinate axes."""
        layout = self.plan.layout
        assert layout is not None
        if layout.units[unit.index].kind != CENTRE:
            radius = scaled(self.plan.s_min, layout.radius_log2(unit.index))
            return self._perturbation(unit, num.log10(radius) * math.log2(10))
        if unit.precision == "perturb":
            return self._perturbation(unit)
        return self._axes(unit, layout.geom.centre_size)

    def _axes(self, frame: FramePlan,
              size: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        spec = self.plan.spec
        w, h = size or spec.size
        cr, ci = spec.view.center
        fmt = frame.precision
        if frame.rotated:  # four terms a sample: (A_re, A_im) per column, (B_re, B_im) per row
            pattern = list(sample_pattern.offsets(self.plan.samples))
            return rotated_axes((cr, ci), frame.spacing, (w, h), pattern,
                                num.rotation(frame.angle, frame.bits), frame.bits, fmt)
        if self.plan.samples == 1:
            return (encode_exact(fmt, *exact_axis(cr, frame.spacing, w, +1, frame.bits)),
                    encode_exact(fmt, *exact_axis(ci, frame.spacing, h, -1, frame.bits)))
        offs = sample_pattern.offsets(self.plan.samples)  # (x right, y down) in 2^-16 px
        return (sample_axis(cr, frame.spacing, w, [o[0] for o in offs], +1, frame.bits, fmt),
                sample_axis(ci, frame.spacing, h, [o[1] for o in offs], -1, frame.bits, fmt))

    def _perturbation(self, frame: FramePlan, log2_dc_max: float | None = None) -> PerturbedFrame:
        """A perturbed frame's arguments (farm/compute/perturbation.py); ``log2_dc_max``
        bounds |dc| (default: from the frame's size and its reference's offset)."""
        if self.references is None:
            raise RuntimeError("a perturbed frame needs its reference orbit")
        pf = perturbed_frame(self.plan, self.references, frame, self.skipping,
                             interior=self.interior, log2_dc_max=log2_dc_max,
                             high_degree=self.high_degree, maps=self._maps)
        # the kernels' layout of the table: 40% of the launching thread's time on a
        # 1080p zoom to 1e-10000 (a 37,752-point reference) when it was made there. It
        # replaces the table's coefficients, and its columns past the last that is not
        # zero are left out (quadratic maps: 10 of 28): a frame of that zoom was 47.6
        # MB to pickle through the helper's pipe, now 8.9
        coef, radius = device_layout(pf.table)
        used = np.flatnonzero(np.any(coef != 0, axis=0))
        coef = np.ascontiguousarray(coef[:, :used[-1] + 1 if len(used) else 0], np.float64)
        table = dataclasses.replace(pf.table, coef=np.zeros((0, pf.table.coef.shape[1])))
        return dataclasses.replace(pf, table=table, layout=(coef, np.ascontiguousarray(radius, np.float64)))


READY = -1  # a helper's first reply: it has its builder
PREPASS = "prepass"  # a message before the builder's arguments: (PREPASS, request, grids, r2)


class _Helper:
    """One helper process, ``python -m farm.compute.prep``: it reads the builder's
    arguments, then (request, frame index) pairs, pickled on its stdin; it answers
    (READY, ...) once it has its builder, then (request, ok, state or error text) per
    request, pickled on its stdout. A thread here writes the requests (the arguments
    first: a write to a full pipe waits for the helper, which takes 0.3 s or more to
    start) and another reads the replies into futures. (Started as a command, not
    through multiprocessing, which would import the user's main script again in it.)"""

    def __init__(self) -> None:
        """Start the process; the builder's arguments come later with :meth:`give` (a
        render starts its helpers before its plan is made, so their imports overlap its
        start-up)."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self._proc = subprocess.Popen([sys.executable, "-m", "farm.compute.prep"], env=env,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        pipes.widen(self._proc.stdout)  # a skip table in a few reads, not thirty
        self.ready = threading.Event()  # its builder is made: requests are answered at once
        self._lock = threading.Lock()
        self._pending: dict[int, concurrent.futures.Future] = {}
        self._gone: str | None = None  # why the helper answers no more
        self._next = 0
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._requests, name="farm-prep-send", daemon=True).start()
        threading.Thread(target=self._replies, name="farm-prep-receive", daemon=True).start()

    def prepass(self, grids: list, r2: float) -> concurrent.futures.Future:
        """Iterate escape pre-pass grids (farm/plan/prepass.py) in the helper, before its
        builder's arguments: a render's helpers start before its plan is made, and wait
        for them while the plan's pre-pass runs."""
        return self._ask(lambda request: (PREPASS, request, grids, r2))

    def give(self, args: bytes) -> None:
        """The builder's arguments, pickled (:func:`pickled`): the first message, before
        any request."""
        self._outbox.put(args)

    def submit(self, index: int) -> concurrent.futures.Future:
        return self._ask(lambda request: (request, index))

    def _ask(self, message: Callable[[int], tuple]) -> concurrent.futures.Future:
        """Send ``message(request)`` under a new request number; the future of its reply."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._gone is not None:  # (no reader is left to answer it)
                future.set_exception(RuntimeError(self._gone))
                return future
            request, self._next = self._next, self._next + 1
            self._pending[request] = future
        self._outbox.put(pickled(message(request)))
        return future

    def _requests(self) -> None:
        stdin = self._proc.stdin
        assert stdin is not None
        with contextlib.suppress(OSError, ValueError):  # the helper is gone: see _replies
            while (message := self._outbox.get()) is not None:  # pickled by the caller
                stdin.write(message)
                stdin.flush()
            stdin.close()  # the helper's loop ends at the end of its input

    def _replies(self) -> None:
        assert self._proc.stdout is not None
        try:
            while True:
                request, ok, value = pickle.load(self._proc.stdout)
                if request == READY:
                    self.ready.set()
                    continue
                with self._lock:
                    future = self._pending.pop(request)
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(RuntimeError(f"frame preparation helper: {value}"))
        except (EOFError, OSError, pickle.UnpicklingError):
            self.ready.clear()
            with self._lock:
                self._gone = f"frame preparation helper exited (status {self._proc.poll()})"
                pending, self._pending = list(self._pending.values()), {}
            for future in pending:
                future.set_exception(RuntimeError(self._gone))

    def ask_to_stop(self) -> None:
        """End the helper's input: its loop ends once it has answered what it holds."""
        self.ready.clear()
        self._outbox.put(None)

    def stop(self, deadline: float) -> None:
        """Wait for the helper to end until ``deadline`` (time.monotonic), then kill it."""
        try:
            self._proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


class FramePrep:
    """Each frame's host state, built once on ``threads`` threads or in ``processes``
    helper processes (see the module's docstring): frames go to the helpers that have
    started (by index, round robin), to the threads while none has. The ``KEEP`` most
    recent frames are kept; a frame whose preparation failed is prepared again when it
    is asked for again. Thread-safe."""

    KEEP = 32  # more than a worker holds ahead (farm/schedule/worker.py: capacity), or
    # frames would be dropped before their launch and built twice

    def __init__(self, plan: Plan, references: References | None, skipping: bool = True,
                 threads: int = 1, interior: bool = True, high_degree: bool = True,
                 processes: int = 0, helpers: list[_Helper] | None = None):
        """``helpers``: processes started earlier (:func:`spawn_helpers`), used instead of
        starting ``processes`` new ones."""
        args = (plan, references, skipping, interior, high_degree)
        self.plan = plan
        self.builder = FrameBuilder(*args)
        self._helpers = helpers if helpers is not None else [_Helper() for _ in range(processes)]
        if self._helpers:
            blob = pickled(args)
            for helper in self._helpers:
                helper.give(blob)
        if self._helpers and os.environ.get("FARM_TEST_PREP_WAIT"):  # tests: every frame to a helper
            if not self.helpers_ready(60):
                raise RuntimeError("frame preparation helpers did not start")
            print("farm: frame preparation helpers ready", file=sys.stderr)
        self._pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="farm-prep")
        self._lock = threading.Lock()
        self._states: collections.OrderedDict[int, concurrent.futures.Future] = (
            collections.OrderedDict())

    def prepare(self, frame: FramePlan) -> concurrent.futures.Future:
        with self._lock:
            future = self._states.get(frame.index)
            if future is not None and future.done() and (future.cancelled() or future.exception()):
                future = None  # built again (a helper that died: on a thread or another helper)
            if future is None:
                ready = [h for h in self._helpers if h.ready.is_set()]
                if ready:  # (frames go by index: mpmath numbers do not survive pickling)
                    assert self.plan.frames[frame.index] is frame
                    future = ready[frame.index % len(ready)].submit(frame.index)
                else:  # (until a helper has started: the same bytes, tests/test_prep.py)
                    future = self._pool.submit(self.builder.build, frame)
                self._states[frame.index] = future
                while len(self._states) > self.KEEP:
                    self._states.popitem(last=False)
            else:
                self._states.move_to_end(frame.index)
            return future

    def helpers_ready(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every helper process to start."""
        return all(h.ready.wait(timeout) for h in self._helpers)

    def close(self) -> None:
        """Stop the threads and helper processes (queued work is dropped)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        close_helpers(self._helpers)


def pickled(message: Any) -> bytes:
    """A message for a helper, pickled on the caller's thread, never on a sending thread:
    the plan and references are shared with the renderers, whose first use of them fills
    cached properties (an orbit's ``log2_abs``), and a dict that changes while another
    thread pickles it fails the pickling. (Seen under mpiexec with a Misiurewicz
    reference: every helper of a rank was left without its builder, and each cost 5 s
    when the rank ended: 40 s of a 7 s render on the 2-GPU H100 machine.)"""
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def spawn_helpers(count: int) -> list[_Helper]:
    """``count`` helper processes, started now and given their work by a FramePrep."""
    return [_Helper() for _ in range(count)]


class HelperRunner:
    """Runs the escape pre-pass's groups of grids in the render's helper processes
    (farm/plan/prepass.py ``Runner``), one group each, the first group here in this
    process; a group whose helper fails is iterated here. On a 16-core GPU host the
    pre-pass was most of a ``max = "auto"`` zoom's start-up (numpy's per-call cost:
    one loop of up to 65,536 steps over every sampled frame at once)."""

    def __init__(self, helpers: list[_Helper]):
        self.helpers = helpers
        self.width = len(helpers) + 1
        self.helped = 0  # groups the helpers iterated

    def __call__(self, groups: list[list], r2: float) -> list[list[int]]:
        futures = [helper.prepass(group, r2) for helper, group in zip(self.helpers, groups[1:], strict=False)]
        out = [prepass.escape_limits(groups[0], r2)]
        for group, future in zip(groups[1:], futures, strict=True):
            try:
                out.append(future.result())
                self.helped += 1
            except Exception:  # a helper that failed or is gone: this process does it
                out.append(prepass.escape_limits(group, r2))
        return out


def close_helpers(helpers: list[_Helper]) -> None:
    """Stop helper processes: all asked at once, then given 5 s together (not each)."""
    for helper in helpers:
        helper.ask_to_stop()
    deadline = time.monotonic() + 5.0
    for helper in helpers:
        helper.stop(deadline)


def _serve() -> None:
    """A helper process's loop (see _Helper)."""
    requests = sys.stdin.buffer
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, not into the replies
    while True:  # escape pre-pass groups (the plan is being made), then the builder
        try:
            first = pickle.load(requests)
        except (EOFError, pickle.UnpicklingError):  # the parent went away before it finished asking
            return
        if not (isinstance(first, tuple) and first and first[0] == PREPASS):
            break
        _, request, grids, r2 = first
        reply: tuple[Any, bool, Any]
        try:
            reply = (request, True, prepass.escape_limits(grids, r2))
        except Exception as err:  # (the caller iterates the group itself)
            reply = (request, False, f"{type(err).__name__}: {err}")
        pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()
    builder = FrameBuilder(*first)
    pickle.dump((READY, True, None), replies)
    replies.flush()
    while True:
        try:
            request, index = pickle.load(requests)
        except (EOFError, pickle.UnpicklingError):  # the parent is gone (or went mid-request)
            return
        try:
            reply = (request, True, builder.build(builder.plan.frames[index]))
        except Exception as err:  # the worker fails the task with this text
            reply = (request, False, f"{type(err).__name__}: {err}")
        pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()


if __name__ == "__main__":
    _serve()
