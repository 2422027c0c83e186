"""The escape pre-pass's steps on an OpenCL device (kernels/prepass.cl,
farm/compute/prepass.py): every point's escape count is the one numpy's loop finds
(farm/plan/prepass.py), so a render on a GPU plans the limits `farm validate` prints."""

from __future__ import annotations

import numpy as np
import pyopencl as cl
from conftest import make_spec

from farm.compute import clstart
from farm.compute import prepass as device_prepass
from farm.numerics import period as per
from farm.plan import make_plan, prepass
from farm.plan.auto_limits import with_period_limits

SEAHORSE = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")
CENTRE = (float(SEAHORSE[0]), float(SEAHORSE[1]))


def _grids() -> list[prepass.Grid]:
    """Grids that take every path of a step: escapes at the first step and later,
    interior points (the main cardioid, a minibrot's cusp), perturbed points rebased
    where their orbit ends (it is shorter than most counts) or where |z| < |d|."""
    size = (32, 18)
    orbit = per.orbit(per.parse(SEAHORSE, 200), 200, 400, 4.0).values
    return [
        prepass.direct_grid(0, CENTRE, size, 2e-5),
        prepass.direct_grid(1, (-0.1011, 0.9563), size, 3e-3),
        prepass.direct_grid(2, (-0.2, 0.0), size, 5.0),  # the whole set: escapes at n = 1, interior
        prepass.direct_grid(3, CENTRE, size, 6.2e-7),  # dense: counts in the tens of thousands
        prepass.perturbed_grid(4, (0.0, 0.0), orbit, size, 2e-9),
        prepass.perturbed_grid(5, (3e-10, -1e-10), orbit, (24, 16), 1e-9),
    ]


def _auto_plan():
    """A 12-frame zoom whose `max = "auto"` limits differ frame by frame."""
    return make_plan(make_spec(size=(64, 36), center=SEAHORSE, width=("3", "1e-9"), frames=12,
                               max_iter="auto", tile=(64, 36)))


def test_device_steps_count_exactly_as_numpy(cl_device):
    """Point for point, the device's escape counts and open tails equal numpy's, for
    direct and perturbed grids iterated together; the cases above all occur."""
    _, dev = cl_device
    queue = cl.CommandQueue(cl.Context([dev]))
    grids, r2 = _grids(), 4.0
    want = prepass.iterate(grids, r2)
    got = device_prepass.iterate(queue, grids, r2)
    assert len(got) == len(want)
    for k, ((a, tail_a), (b, tail_b)) in enumerate(zip(got, want, strict=True)):
        assert tail_a == tail_b, k
        assert np.array_equal(a, b), (k, len(a), len(b))
    assert (want[2][0] == 1).any() and len(want[2][0]) < grids[2].dr.size  # escapes at 1; interior
    assert max(len(g.orbit) for g in grids[4:]) < max(int(c.max()) for c, _ in want[4:])  # rebased
    assert int(want[3][0].max()) > 10000


def test_the_device_runner_plans_the_limits_numpy_plans(cl_device):
    """`with_period_limits` with the device's runner (on the context made beside a
    render's start) gives the plan numpy gives; where no context was made for the
    device, the runner does the pre-pass on the CPU, the same limits again."""
    _, dev = cl_device
    base = _auto_plan()
    refs = base.references()
    want = [f.max_iter for f in with_period_limits(base, refs).frames]
    assert len(set(want)) > 3  # limits that differ frame by frame
    idle = device_prepass.DeviceRunner(dev)
    assert [f.max_iter for f in with_period_limits(base, refs, idle).frames] == want
    assert not idle.used  # no context made for it: the CPU did it
    clstart.prepare_contexts([dev])
    try:
        runner = device_prepass.DeviceRunner(dev)
        assert [f.max_iter for f in with_period_limits(base, refs, runner).frames] == want
        assert runner.used
    finally:
        clstart.release_unused()


def test_a_new_stores_limits_come_from_the_renders_device(cl_device, tmp_path, monkeypatch):
    """`prepare_store` of a `max = "auto"` job hands the pre-pass to the render's device
    (`_prepass_device`: its first GPU, else its first device) and stores the limits numpy
    plans."""
    from farm.run import prepare as run
    from farm.store.reader import Store

    info, dev = cl_device
    base = _auto_plan()
    want = [f.max_iter for f in with_period_limits(base, base.references()).frames]
    runners: list[device_prepass.DeviceRunner] = []
    real_call = device_prepass.DeviceRunner.__call__

    def spy(self, groups, r2):
        runners.append(self)
        return real_call(self, groups, r2)

    monkeypatch.setattr(device_prepass.DeviceRunner, "__call__", spy)
    clstart.prepare_contexts([dev])
    try:
        assert run.prepass_device([(info, dev)]) is dev
        plan, _, _ = run.prepare_store(base.spec, tmp_path / "auto.h5", restart=False, progress=False,
                                       prepass_device=run.prepass_device([(info, dev)]))
    finally:
        clstart.release_unused()
    assert [f.max_iter for f in plan.frames] == want
    with Store(tmp_path / "auto.h5") as s:
        assert [f.max_iter for f in s.plan().frames] == want
    assert len(runners) == 1 and runners[0].used and runners[0].device is dev


def test_an_mpi_master_gets_a_device_for_the_pre_pass():
    """Under MPI the master renders nothing, yet `max = "auto"`'s pre-pass runs on its
    node's device as in one process (not numpy on one core: 66.8 s against 18.8 s for a
    3-rank render on 2 cores), on a context made beside the start."""
    from farm.compute import clstart
    from farm.run.mpi import _prepass_here

    device = _prepass_here("auto")
    try:
        assert device is not None
        clstart.wait_contexts()
        assert clstart.made_for(device) is not None
    finally:
        clstart.release_unused()
