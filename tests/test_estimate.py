"""The time left is predicted from what finished tiles cost (farm/estimate.py)."""

from __future__ import annotations

import numpy as np

from farm.estimate import WorkEstimate, eta_seconds


def _zoom(frames=20, tiles=6, growth=1.25, seed=1):
    """Device seconds per tile of a zoom whose frames grow dearer by ``growth`` each."""
    rng = np.random.default_rng(seed)
    base = 0.01 * growth ** np.arange(frames)
    return base[:, None] * rng.uniform(0.8, 1.2, (frames, tiles))


def test_a_zoom_that_gets_dearer_is_extrapolated():
    cost = _zoom()
    done = np.zeros(cost.shape, bool)
    done[:8] = True
    done[8, :3] = True
    est = WorkEstimate(done, cost).remaining_device_s()
    truth = cost[~done].sum()
    assert abs(est - truth) / truth < 0.25, (est, truth)
    by_tiles = cost[done].sum() / done.sum() * (~done).sum()  # what counting tiles says
    assert by_tiles < truth / 3  # the old ETA was off by more than 3x here


def test_add_follows_finished_tiles_and_nothing_done_gives_no_estimate():
    cost = _zoom(frames=4, growth=1.0)
    est = WorkEstimate(np.zeros(cost.shape, bool), cost)
    assert est.remaining_device_s() is None
    for f in range(4):
        for t in range(cost.shape[1]):
            est.add(f, t, cost[f, t])
    assert est.remaining_device_s() == 0.0


def test_eta_is_device_time_left_at_the_runs_rate():
    assert eta_seconds(10.0, device_s_this_run=4.0, wall_s_this_run=2.0) == 5.0  # 2 workers
    assert eta_seconds(None, 1.0, 1.0) is None and eta_seconds(3.0, 0.0, 1.0) is None
