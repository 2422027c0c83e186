"""The time left is predicted from what finished tiles cost (farm/store/estimate.py), and
`farm validate` states the kernels' time (farm/run/report.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from farm.store.estimate import WorkEstimate, cost_shape, eta_seconds

DATA = Path(__file__).parent / "data"
# Per-tile device seconds and finish times of real renders on the 2-core machine (PoCL,
# one worker), with each frame's limit, width and format: jobs/demo.toml; the Seahorse
# zoom of jobs/seahorse.toml at 192x108, 120 frames (f64, then perturbation around the
# period-1996 and 8007 nuclei); a perturbed zoom into jobs/dendrite.toml's point at
# 320x180, 4 to 1e-40 in 80 frames; jobs/seahorse_expmap.toml at 192x108, 400 frames (73
# units). Each npz: seconds, finished (s from the run's start) float32 (F, T); max_iter,
# log10_width, perturbed (F,).
RECORDED = ("demo", "seahorse_small", "perturb_zoom", "expmap_small")


def _zoom(frames=20, tiles=6, growth=1.25, seed=1):
    """Device seconds per tile of a zoom whose frames grow dearer by ``growth`` each."""
    rng = np.random.default_rng(seed)
    base = 0.01 * growth ** np.arange(frames)
    return base[:, None] * rng.uniform(0.8, 1.2, (frames, tiles))


def test_a_zoom_that_gets_dearer_follows_its_shape():
    """Frames whose plan says they cost more (cost_shape: raised limits) are predicted
    so; counting tiles, or the frames seen so far alone, says less than a third."""
    cost = _zoom()
    shape = 1.25 ** np.arange(cost.shape[0])
    done = np.zeros(cost.shape, bool)
    done[:8] = True
    done[8, :3] = True
    est = WorkEstimate(done, cost, shape).remaining_device_s()
    truth = cost[~done].sum()
    assert abs(est - truth) / truth < 0.25, (est, truth)
    assert WorkEstimate(done, cost).remaining_device_s() < truth / 3  # no shape: the past level


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


def _validate_time(monkeypatch, tmp_path, rates: dict, **kw):
    """(device seconds `farm validate` states, its time line) for a job of ``kw``
    on a device whose `farm bench` rates (Giter/s) are ``rates``."""
    from conftest import make_spec

    from farm.compute import rates as rates_mod
    from farm.plan import make_plan
    from farm.run.report import _time_line, plan_info

    monkeypatch.setenv("FARM_RATES", str(tmp_path / "rates.json"))
    rates_mod.remember("dev", rates)
    plan = make_plan(make_spec(**kw))
    return plan_info(plan, "job.toml", "dev")["device_seconds_bound"], _time_line(plan, "dev")


def test_the_time_estimate_counts_every_sample(monkeypatch, tmp_path):
    """1, 4 and 16 samples a pixel are 1, 4 and 16 times the kernels' work (`farm
    validate` said "at most 4.23 s" for all three)."""
    kw = dict(size=(64, 48), width=("3", "3"), max_iter=1000, precision="f64")
    one, _ = _validate_time(monkeypatch, tmp_path, {"f64": 0.5}, samples=1, **kw)
    four, line = _validate_time(monkeypatch, tmp_path, {"f64": 0.5}, samples=4, **kw)
    sixteen, _ = _validate_time(monkeypatch, tmp_path, {"f64": 0.5}, samples=16, **kw)
    assert one == 64 * 48 * 1000 / 0.5e9
    assert four == 4 * one and sixteen == 16 * one
    assert "(x 4 samples)" in line and "start-up" in line and "video" in line


def test_frames_below_doubles_take_the_floatexp_rate(monkeypatch, tmp_path):
    """Perturbed frames below 1e-305 run floatexp deltas, which `farm bench` times as
    "perturb-fx" (20x slower than "perturb" on PoCL): the estimate takes that rate."""
    kw = dict(size=(32, 18), width=("1e-400", "1e-400"), max_iter=1000, precision="perturb")
    seconds, _ = _validate_time(monkeypatch, tmp_path, {"perturb": 1.0, "perturb-fx": 0.05}, **kw)
    assert seconds == 32 * 18 * 1000 / 0.05e9


def replay(path: Path) -> list[tuple[float, float, float, float]]:
    """(share of the work done, ETA, true time left, the run's length) after each
    finished tile of a recorded render, the ETA computed as the progress bar does
    (farm/run.py: the estimate fed tile by tile, at this run's device-per-wall rate;
    `farm status` computes the same from the store)."""
    data = np.load(path)
    seconds = data["seconds"].astype(np.float64)
    finished = data["finished"].astype(np.float64)
    shape = cost_shape(data["max_iter"], data["log10_width"], data["perturbed"])
    estimate = WorkEstimate(np.zeros(seconds.shape, bool), np.zeros(seconds.shape), shape)
    end, total, device = float(finished.max()), float(seconds.sum()), 0.0
    out = []
    for q in np.argsort(finished, axis=None, kind="stable"):
        f, t = np.unravel_index(q, seconds.shape)
        estimate.add(int(f), int(t), float(seconds[f, t]))
        device += float(seconds[f, t])
        wall = float(finished[f, t])
        eta = eta_seconds(estimate.remaining_device_s(), device, wall)
        assert eta is not None
        out.append((device / total, eta, end - wall, end))
    return out


@pytest.mark.parametrize("name", RECORDED)
def test_the_eta_of_a_recorded_zoom_stays_within_2x(name):
    """Once 15% of the work is done, the ETA is within 2x of the time that remained,
    until the last 10% of the run; there (seconds are left, a factor means little)
    within 15% of the run's length. The exponential extrapolation that was here said
    9551 s where 65 s followed."""
    for work, eta, left, run in replay(DATA / f"eta_{name}.npz"):
        if work < 0.15:
            continue
        if left >= 0.1 * run:
            assert left / 2 <= eta <= 2 * left, (name, work, eta, left)
        else:
            assert abs(eta - left) <= 0.15 * run, (name, work, eta, left)


def test_the_cost_shape_follows_the_raised_limits():
    """A frame whose limit the escape pre-pass raised 10x above the depth rule (a
    dense frame: its interior pays every iteration) is predicted 10x a frame at the
    depth rule, perturbed frames (skipping) 10^0.75 x; a fixed max: all equal."""
    from farm.plan import auto_max_iter

    depth = auto_max_iter(6.0)
    shape = cost_shape([depth, 10 * depth, 10 * depth], [np.log10(4) - 6] * 3, [False, False, True])
    assert shape[1] == pytest.approx(10 * shape[0]) and shape[2] == pytest.approx(10 ** 0.75 * shape[0])
    assert list(cost_shape([100, 5000], [0.0, -9.0], [False, True], auto=False)) == [1.0, 1.0]
