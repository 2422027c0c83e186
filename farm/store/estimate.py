"""How much work is left: the device time of the tiles not yet rendered, predicted
from what finished tiles cost, and the time left it makes at the run's pace.

Tiles are not equal: a dense or deep frame costs many times a sparse shallow one, so
counting tiles puts the end of a zoom far too early (the 1e-8 demo's first 62% of
tiles are 12% of its work, first.toml's first 41% are 7%), and extrapolating the cost
trend puts it far too late (an exponential fit said 9551 s where 65 s followed). The
estimate works in device seconds (the kernel time of each tile, measured with
profiling events and kept in the store's ``tiles/seconds``) and predicts a frame's
cost per tile as ``level * shape[f]``, where ``shape[f]`` is what the plan says about
the frame before it is rendered and ``level`` is measured on the frames already
rendered.

**The shapes.** Device time follows the iterations a frame's pixels run (about 3-6 ns
an iteration on PoCL's two cores, f64 or perturbed), and those follow the frame's
iteration limit L only loosely: the pixels' mean count was 0.1x to 0.7x of L in the
zooms recorded (0.1-0.2x at the depth rule's limits, up to 0.7x in dense frames whose
interior pays the whole limit), and perturbed frames skip more of their iterations the
deeper they are (6.3 -> 1.65 ns an iteration from 1e-9 to 1e-49 into the dendrite).
No one power of L fits every zoom: the cost of the Seahorse zooms to 1e-8 and 1e-14
grows nearly in proportion to L; that of deep perturbed zooms, and of frames whose
limit a minibrot's period raised, as L^(1/4) or less. So two shapes bracket it:

* slow (:func:`cost_shape`): L^(1/4) along the depth rule's limits D, and the raise
  above it, ``(L/D)^1`` for direct formats and ``(L/D)^0.75`` for perturbed frames:
  ``min(L, D)^(1/4) * max(L/D, 1)^p``;
* fast (:func:`fast_shape`): ``L^0.9``, perturbed frames times ``d0/d``, d the
  frame's depth in decades of zoom and d0 that of the first perturbed frame (skipping).

Each gives an estimate of the device time left (with its own ``level``); the estimate
is their geometric mean, weighted 0.6 and 0.4 (``WEIGHTS``): within (fast/slow)^0.6 of
either. With a fixed ``max``, every frame has the same shape. The powers and weights
were chosen on the recordings below (worst factor over all of them).

**The level** of a shape is the mean of ``cost per tile / shape`` over the frames
with finished tiles, weighted by their finished tiles and by recency in frame order
(half the weight every ``MEMORY`` x the frames seen so far): a zoom's cost per unit
of shape drifts (interior share, skipping, the machine's load), and the recent frames
say most about the next. A frame with some finished tiles blends: its remaining tiles
cost ``s * mean of its finished tiles + (1 - s) * level * shape`` (s: its share of
finished tiles), since the tiles of one frame differ.

**Tested** against the per-tile costs of real renders on the 2-core machine (PoCL,
shared with other work), replayed tile by tile as the progress bar and ``farm
status`` read them (tests/data/eta_*.npz, tests/test_estimate.py, which lists the
zooms and each one's worst factor). Once 15% of the work is done the time left stays
within 2x of the time that remained (1.23x-1.98x), until the last 10% of the run, and
within 15% of the run's length there, on eleven zooms: Seahorse Valley to 1e-8,
1e-14 (three recordings, one while the machine's other load grew) and 1e-20 (frame by
frame and as an exponential map), the dendrite to 1e-40 and 1e-50, and a minibrot at
1e-30 (a 10-second zoom). Before this (the slow shape alone) the 1e-14 zoom was
2.3-2.7x too low. It misses on a zoom ending on a minibrot that fills its last frames
(tests/data/eta_minibrot_end.npz): their limits rise 10x for its period and their cost
does not, so with 15% of the run left it is 2.1x too high, 2.7x with 11%; and at 15%
of its work, where the period first sets the limits and each pixel runs a period, it
is 2.1x too low (within 2x from 20% of the work to the last 20% of the run).

**The time left** is the remaining device time over the pace at which this run turns
device time into wall time (several workers: more than 1 device second a second;
overheads: less). Between finished tiles the tiles in flight go on at that pace, so
the time left counts down; but only as far as their predicted cost: a tile that
takes longer slows the pace instead (:func:`reading`). ``done`` and ``rate`` are then
the share of the predicted work done and the share done a second, so that the bar's
rate and time left agree: ``left = (1 - done) / rate``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

MEMORY = 0.75  # recency half-life, as a share of the frames with finished tiles
BASE_POWER = 0.25  # the slow shape along the depth rule: L^(1/4)
RAISE_POWER = {False: 1.0, True: 0.75}  # above it: direct formats, perturbed frames
FAST_POWER = 0.9  # the fast shape: L^0.9
SKIP_POWER = 1.0  # perturbed frames in the fast shape: (d / d0)^-1
WEIGHTS = (0.6, 0.4)  # of the slow and the fast shape's estimates (logarithms)


def cost_shape(max_iter: Sequence[int], log10_width: Sequence[float], perturbed: Sequence[bool],
               auto: bool = True) -> np.ndarray:
    """Relative device cost per tile of each frame (F,) before it is rendered: see the
    module's docstring. ``log10_width``: each frame's (or expmap unit's) width,
    log10 of complex-plane units; ``auto``: the spec's ``max = "auto"`` (with a fixed
    limit every frame gets 1)."""
    from farm.plan import auto_max_iter

    limits = np.asarray(max_iter, dtype=np.float64)
    if not auto:
        return np.ones(len(limits))
    depth = np.array([auto_max_iter(math.log10(4) - w) for w in log10_width], dtype=np.float64)
    power = np.array([RAISE_POWER[bool(p)] for p in perturbed])
    return np.minimum(limits, depth) ** BASE_POWER * np.maximum(limits / depth, 1.0) ** power


def fast_shape(max_iter: Sequence[int], log10_width: Sequence[float], perturbed: Sequence[bool],
               auto: bool = True) -> np.ndarray:
    """The other bracket of a frame's relative cost (F,): ``L^0.9``, perturbed frames
    times ``d0/d`` (module docstring)."""
    limits = np.asarray(max_iter, dtype=np.float64)
    if not auto:
        return np.ones(len(limits))
    depth = np.maximum(math.log10(4) - np.asarray(log10_width, dtype=np.float64), 0.0)
    deltas = np.asarray(perturbed, dtype=bool)
    first = max(float(depth[deltas].min()), 1.0) if deltas.any() else 1.0
    skip = np.where(deltas, (np.maximum(depth, first) / first) ** -SKIP_POWER, 1.0)
    return limits ** FAST_POWER * skip


def shapes(max_iter: Sequence[int], log10_width: Sequence[float], perturbed: Sequence[bool],
           auto: bool = True) -> np.ndarray:
    """Both brackets (2, F): :func:`cost_shape` and :func:`fast_shape`."""
    args = (max_iter, log10_width, perturbed, auto)
    return np.stack([cost_shape(*args), fast_shape(*args)])


def plan_shape(plan) -> np.ndarray:
    """:func:`shapes` of a plan's rendered frames (expmap: its units)."""
    import mpmath

    return shapes([f.max_iter for f in plan.frames],
                  [float(mpmath.log10(f.width)) for f in plan.frames],
                  [f.precision == "perturb" for f in plan.frames],
                  plan.spec.iterations.max == "auto")


class WorkEstimate:
    def __init__(self, done: np.ndarray, seconds: np.ndarray, shape: np.ndarray | None = None):
        """``done`` bool (F, T) and ``seconds`` float (F, T), as the store keeps them;
        ``shape`` each frame's relative cost, (F,), or the slow and the fast one (2, F)
        whose estimates are combined (:func:`plan_shape`; None: all equal)."""
        self.done = np.array(done, dtype=bool)
        self.seconds = np.where(self.done, np.asarray(seconds, dtype=np.float64), 0.0)
        frames = self.done.shape[0]
        shape = np.ones(frames) if shape is None else np.asarray(shape, dtype=np.float64)
        self.shapes = np.atleast_2d(shape)

    def add(self, frame: int, tile: int, seconds: float) -> None:
        self.done[frame, tile] = True
        self.seconds[frame, tile] = seconds

    def done_device_s(self) -> float:
        """Device seconds of the finished tiles (every run's)."""
        return float(self.seconds.sum())

    def _per_tile(self) -> np.ndarray | None:
        """Predicted device seconds of one of each frame's tiles not done (F,), scaled so
        that they add up to the shapes' estimates' weighted geometric mean; None before
        any tile is done."""
        if not self.done.any():
            return None
        tiles = self.done.shape[1]
        count = self.done.sum(axis=1)
        left = tiles - count
        per_tile = np.divide(self.seconds.sum(axis=1), count, out=np.zeros(len(count)),
                             where=count > 0)
        known = np.flatnonzero(count > 0)
        half_life = max(2.0, MEMORY * len(known))
        weight = 0.5 ** ((known[-1] - known) / half_life) * count[known]
        share = count / tiles
        predicted = []
        for shape in self.shapes:
            level = float((weight * per_tile[known] / shape[known]).sum() / weight.sum())
            predicted.append(share * per_tile + (1 - share) * level * shape)
        each = np.array(predicted)  # (K, F)
        totals = (each * left).sum(axis=1)
        if len(each) == 1 or not (totals > 0).all():
            return each[0] if len(each) == 1 else each.mean(axis=0)
        w = np.array(WEIGHTS)[:, None]
        mean = np.exp((w * np.log(each, where=each > 0, out=np.zeros_like(each))).sum(axis=0))
        scale = float(np.exp((w[:, 0] * np.log(totals)).sum()) / max((mean * left).sum(), 1e-300))
        return mean * scale

    def remaining_device_s(self) -> float | None:
        """Predicted device seconds of the tiles not done; None before any tile is."""
        per_tile = self._per_tile()
        if per_tile is None:
            return None
        return float((per_tile * (~self.done).sum(axis=1)).sum())

    def next_device_s(self, tiles: int) -> float:
        """Predicted device seconds of the first ``tiles`` tiles not done, in the order the
        master hands them out (frame by frame): those in flight."""
        per_tile = self._per_tile()
        if per_tile is None or tiles <= 0:
            return 0.0
        frames = np.flatnonzero(~self.done.ravel())[:tiles] // self.done.shape[1]
        return float(per_tile[frames].sum())


def eta_seconds(remaining_device_s: float | None, device_s_this_run: float,
                wall_s_this_run: float) -> float | None:
    """Wall seconds left: remaining device time at this run's device-per-wall rate."""
    if remaining_device_s is None or device_s_this_run <= 0 or wall_s_this_run <= 0:
        return None
    return remaining_device_s * wall_s_this_run / device_s_this_run


@dataclass(frozen=True)
class Reading:
    """The work at one moment: ``done`` the share of the predicted device time that is
    done (every run's), ``rate`` the share this run does a second, ``left_s`` the wall
    seconds left: ``left_s == (1 - done) / rate``."""

    done: float
    rate: float
    left_s: float


def reading(remaining_s: float | None, done_s: float, run_device_s: float, run_wall_s: float,
            since_s: float = 0.0, in_flight_s: float = 0.0) -> Reading | None:
    """The work done and the time left ``since_s`` wall seconds after this run's latest
    finished tile: ``remaining_s`` predicted device seconds were left then, ``done_s``
    were done (every run's), ``run_device_s`` of them by this run in its first
    ``run_wall_s`` seconds (its pace: device seconds a wall second).

    Between tiles the tiles in flight go on at that pace, so the time left counts down;
    but no further than their predicted device time ``in_flight_s``: a tile that takes
    longer than predicted slows the pace instead (the time left then grows slowly; it
    neither stands still nor reaches 0 with work left)."""
    if remaining_s is None or run_device_s <= 0 or run_wall_s <= 0:
        return None
    pace = run_device_s / run_wall_s
    since_s = max(since_s, 0.0)
    progressed = min(since_s * pace, max(min(in_flight_s, remaining_s), 0.0))
    device, wall = run_device_s + progressed, run_wall_s + since_s
    total = done_s + remaining_s
    if total <= 0:
        return Reading(1.0, 0.0, 0.0)
    rate = device / wall / total
    left = (remaining_s - progressed) * wall / device
    return Reading((done_s + progressed) / total, rate, left)


class RunClock:
    """A render's time left, read at any moment (the progress bar's ``work``): the
    estimate, fed the run's tiles as they finish, and the run's pace since it started.
    ``workers`` is how many tiles are in flight at once (one per worker)."""

    def __init__(self, estimate: WorkEstimate, workers: int = 1,
                 clock: Callable[[], float] = time.monotonic):
        self.estimate, self.workers, self.clock = estimate, max(1, workers), clock
        self.t0 = self.at = clock()  # the run's start, its latest finished tile
        self.device_s = 0.0  # this run's
        self._predicted: tuple[float, float, float] | None = None  # at the latest tile
        self._lock = threading.Lock()

    def add(self, frame: int, tile: int, seconds: float) -> None:
        with self._lock:
            self.estimate.add(frame, tile, seconds)
            self.device_s += seconds
            self.at = self.clock()
            self._predicted = None

    def reading(self, now: float | None = None) -> Reading | None:
        now = self.clock() if now is None else now
        with self._lock:
            if self._predicted is None:  # predicted once a finished tile, read at any time
                est = self.estimate
                self._predicted = (est.remaining_device_s() or 0.0, est.done_device_s(),
                                   est.next_device_s(self.workers))
            remaining, done, in_flight = self._predicted
            return reading(remaining, done, self.device_s, self.at - self.t0, now - self.at,
                           in_flight)
