"""How much work is left: the device time of the tiles not yet rendered, predicted
from what finished tiles cost.

Tiles are not equal: a deep frame costs many times a shallow one (its iteration
limit and its pixels' counts grow with depth), so counting tiles puts the end of a
zoom far too early. The estimate instead works in device seconds (the kernel time of
each tile, measured with profiling events and kept in the store's ``tiles/seconds``):

* a frame with finished tiles costs, per remaining tile, the mean of its finished
  tiles;
* a frame with none is predicted from the complete frames before it: the logarithm
  of their cost per tile is fitted with a straight line over frame index (the last
  ``window`` complete frames) and extended, so a cost that grows by a steady factor
  per frame, as a zoom at constant speed does, is followed; the slope is taken no
  lower than 0 per frame (a zoom rarely gets cheaper for long) and no higher than the
  steepest step seen, so one odd frame does not throw it off.

The time left is then that remaining device time over the rate at which this run
turns device time into wall time (several workers: more than 1 device second a
second; overheads: less).
"""

from __future__ import annotations

import numpy as np


class WorkEstimate:
    def __init__(self, done: np.ndarray, seconds: np.ndarray, window: int = 16):
        """``done`` bool (F, T) and ``seconds`` float (F, T), as the store keeps them."""
        self.done = np.array(done, dtype=bool)
        self.seconds = np.where(self.done, np.asarray(seconds, dtype=np.float64), 0.0)
        self.window = window

    def add(self, frame: int, tile: int, seconds: float) -> None:
        self.done[frame, tile] = True
        self.seconds[frame, tile] = seconds

    def remaining_device_s(self) -> float | None:
        """Predicted device seconds of the tiles not done; None before any tile is."""
        if not self.done.any():
            return None
        tiles = self.done.shape[1]
        count = self.done.sum(axis=1)
        left = tiles - count
        per_tile = np.divide(self.seconds.sum(axis=1), count, out=np.zeros(len(count)),
                             where=count > 0)
        todo = np.flatnonzero(left > 0)
        started = todo[count[todo] > 0]
        total = float((per_tile[started] * left[started]).sum())
        fresh = todo[count[todo] == 0]
        if len(fresh):
            total += float(self._predict(per_tile, count == tiles, fresh).sum()) * tiles
        return total

    def _predict(self, per_tile: np.ndarray, complete: np.ndarray, frames: np.ndarray) -> np.ndarray:
        """Cost per tile of frames with no finished tile."""
        known = np.flatnonzero(complete | (per_tile > 0))
        known = known[per_tile[known] > 0]
        if len(known) == 0:
            return np.zeros(len(frames))
        known = known[-self.window:]
        logs = np.log(per_tile[known])
        last, base = known[-1], logs[-1]
        slope = 0.0
        if len(known) >= 2:
            steps = np.diff(logs) / np.diff(known)
            slope = float(np.clip(np.polyfit(known, logs, 1)[0], 0.0, max(steps.max(), 0.0)))
        return np.exp(base + slope * (frames - last))


def eta_seconds(remaining_device_s: float | None, device_s_this_run: float,
                wall_s_this_run: float) -> float | None:
    """Wall seconds left: remaining device time at this run's device-per-wall rate."""
    if remaining_device_s is None or device_s_this_run <= 0 or wall_s_this_run <= 0:
        return None
    return remaining_device_s * wall_s_this_run / device_s_this_run
