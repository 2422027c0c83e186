"""How much work is left: the device time of the tiles not yet rendered, predicted
from what finished tiles cost.

Tiles are not equal: a dense or deep frame costs many times a sparse shallow one, so
counting tiles puts the end of a zoom far too early, and extrapolating the cost trend
puts it far too late (the exponential fit this module used before said 9551 s where 65
s followed). The estimate works in device seconds (the kernel time of each tile,
measured with profiling events and kept in the store's ``tiles/seconds``) and predicts
a frame's cost per tile as ``level * shape[f]``:

* ``shape[f]`` (:func:`cost_shape`) is what the plan says about the frame's cost
  before it is rendered: its iteration limit L. Escaping pixels cost their counts,
  which grow slowly with depth: the shape grows as L^(1/4) along the depth rule's
  limits. Where a frame's limit was raised above the depth rule's D (the escape
  pre-pass raises dense frames, mostly interior, whose interior pixels each cost the
  whole limit; nucleus periods raise deep ones), the cost follows the raise, (L/D)^1
  for direct formats and (L/D)^0.75 for perturbed frames (skipping takes part of it):
  ``shape = min(L, D)^(1/4) * max(L/D, 1)^p``. With a fixed ``max``, every frame has
  the same shape.
* ``level`` is the mean of ``cost per tile / shape`` over the frames with finished
  tiles, weighted by their finished tiles and by recency in frame order (half the
  weight every ``MEMORY`` x the frames seen so far): a zoom's cost per unit of shape
  drifts (interior share, skipping), and the recent frames say most about the next.

A frame with some finished tiles blends: its remaining tiles cost ``s * mean of its
finished tiles + (1 - s) * level * shape`` (s: its share of finished tiles), since
the tiles of one frame differ (the centre of a zoom is often the dense part).

Tested against the per-tile costs of real renders (tests/data/eta_*.npz: the demo,
the Seahorse zoom at 192x108, a perturbed zoom into the dendrite, the Seahorse as an
exponential map; replayed as the progress bar and ``farm status`` use this): once 15%
of the work is done the ETA is within 1.93x of the time that remained, until the last
10% of the run, and within 11% of the run's length there. From 10% of the work: 2.54x
(the demo, whose dense frames hold 80% of its work in 14 of 90 frames). The
exponents and the memory were chosen on those four recordings; on three held out
(recorded before the escape pre-pass: a 4 s zoom, the dendrite, a zoom from 1e-9),
1.65x, 1.35x and, on the 4 s one, 2.59x.

The time left is then that remaining device time over the rate at which this run
turns device time into wall time (several workers: more than 1 device second a
second; overheads: less).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

MEMORY = 0.75  # recency half-life, as a share of the frames with finished tiles
BASE_POWER = 0.25  # the shape along the depth rule: L^(1/4)
RAISE_POWER = {False: 1.0, True: 0.75}  # above it: direct formats, perturbed frames


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


def plan_shape(plan) -> np.ndarray:
    """:func:`cost_shape` of a plan's rendered frames (expmap: its units)."""
    import mpmath

    return cost_shape([f.max_iter for f in plan.frames],
                      [float(mpmath.log10(f.width)) for f in plan.frames],
                      [f.precision == "perturb" for f in plan.frames],
                      plan.spec.iterations.max == "auto")


class WorkEstimate:
    def __init__(self, done: np.ndarray, seconds: np.ndarray, shape: np.ndarray | None = None):
        """``done`` bool (F, T) and ``seconds`` float (F, T), as the store keeps them;
        ``shape`` (F,) each frame's relative cost (:func:`plan_shape`; None: equal)."""
        self.done = np.array(done, dtype=bool)
        self.seconds = np.where(self.done, np.asarray(seconds, dtype=np.float64), 0.0)
        frames = self.done.shape[0]
        self.shape = np.ones(frames) if shape is None else np.asarray(shape, dtype=np.float64)

    def add(self, frame: int, tile: int, seconds: float) -> None:
        self.done[frame, tile] = True
        self.seconds[frame, tile] = seconds

    def remaining_device_s(self) -> float | None:
        """Predicted device seconds of the tiles not done; None before any tile is."""
        if not self.done.any():
            return None
        tiles = self.done.shape[1]
        count = self.done.sum(axis=1)
        per_tile = np.divide(self.seconds.sum(axis=1), count, out=np.zeros(len(count)),
                             where=count > 0)
        known = np.flatnonzero(count > 0)
        half_life = max(2.0, MEMORY * len(known))
        weight = 0.5 ** ((known[-1] - known) / half_life) * count[known]
        level = float((weight * per_tile[known] / self.shape[known]).sum() / weight.sum())
        share = count / tiles
        predicted = share * per_tile + (1 - share) * level * self.shape
        return float((predicted * (tiles - count)).sum())


def eta_seconds(remaining_device_s: float | None, device_s_this_run: float,
                wall_s_this_run: float) -> float | None:
    """Wall seconds left: remaining device time at this run's device-per-wall rate."""
    if remaining_device_s is None or device_s_this_run <= 0 or wall_s_this_run <= 0:
        return None
    return remaining_device_s * wall_s_this_run / device_s_this_run
