"""Frame preparation in helper processes (farm/compute/prep.py, GPUs' default) builds
what a thread builds, bit for bit, and a render that uses it writes the same store."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_same_datasets, make_spec, run_farm

from farm.compute.perturbation import PerturbedFrame
from farm.compute.prep import FramePrep
from farm.plan import make_plan

SEAHORSE = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")


def _same(a, b) -> None:
    if isinstance(a, PerturbedFrame):
        assert isinstance(b, PerturbedFrame)
        for field in dataclasses.fields(a):
            x, y = getattr(a, field.name), getattr(b, field.name)
            if field.name == "table":
                for name in ("coef", "radius", "offsets"):
                    assert np.array_equal(getattr(x, name), getattr(y, name)), name
                assert (x.log2_radii, x.shift) == (y.log2_radii, y.shift)
            elif field.name == "layout":  # the table as the kernels read it
                assert all(np.array_equal(u, v) for u, v in zip(x, y, strict=True))
            else:
                assert x == y, field.name
    else:
        assert len(a) == len(b) == 2
        for x, y in zip(a, b, strict=True):
            assert x.dtype == y.dtype and np.array_equal(x, y)


def test_a_helper_process_builds_what_a_thread_builds():
    perturbed = make_spec(size=(64, 36), center=SEAHORSE, width=("1e-18", "1e-21"), frames=4,
                          max_iter=20000, precision="perturb")
    direct = make_spec(size=(40, 24), width=("3", "1e-3"), frames=3, samples=4)
    for spec in (perturbed, direct):
        plan = make_plan(spec)
        refs = plan.references() if spec is perturbed else None
        threads, helper = FramePrep(plan, refs), FramePrep(plan, refs, processes=1)
        try:
            assert helper.helpers_ready(60)  # else frames would go to its thread
            for frame in plan.frames:
                want, got = threads.prepare(frame).result(), helper.prepare(frame).result()
                _same(want, got)
                if spec is perturbed:
                    assert want.table.valid.sum() > 100  # the frames do skip
        finally:
            helper.close()
            threads.close()


def test_a_frame_is_prepared_again_after_a_failure_and_a_dead_helper():
    """A failed preparation is not kept: asked again, the frame is built again; frames
    asked for after a helper died go to the thread (and give the same bytes)."""
    plan = make_plan(make_spec(size=(40, 24), center=SEAHORSE, width=("1e-18", "1e-20"),
                               frames=3, max_iter=20000, precision="perturb"))
    refs = plan.references()
    want = [FramePrep(plan, refs).prepare(f).result() for f in plan.frames]
    prep = FramePrep(plan, refs, processes=1)
    try:
        assert prep.helpers_ready(60)
        _same(want[0], prep.prepare(plan.frames[0]).result())  # from the helper
        helper = prep._helpers[0]
        helper._proc.kill()
        assert helper._proc.wait(30) != 0
        for _ in range(600):  # its reply thread sees the end of its output
            if not helper.ready.is_set():
                break
            time.sleep(0.05)
        assert not helper.ready.is_set()
        assert helper.submit(1).exception(timeout=5) is not None  # nothing left to answer
        _same(want[1], prep.prepare(plan.frames[1]).result())  # on the thread
        build, calls = prep.builder.build, []

        def fails_once(frame):
            calls.append(frame.index)
            if len(calls) == 1:
                raise RuntimeError("a preparation that fails")
            return build(frame)

        prep.builder.build = fails_once  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            prep.prepare(plan.frames[2]).result()
        _same(want[2], prep.prepare(plan.frames[2]).result())
        assert calls == [2, 2]
    finally:
        prep.close()


def test_messages_to_helpers_are_pickled_by_the_caller_and_helpers_stop_together(monkeypatch):
    """The builder's arguments and each request are pickled on the thread that gives
    them, before it goes on: the renderers fill cached properties of the same plan and
    references (an orbit's log2_abs), and a sending thread that pickled them meanwhile
    failed ("dictionary changed size during iteration"), leaving the helper without its
    builder. Closing stops all helpers within one 5 s allowance, not 5 s each."""
    import threading

    import farm.compute.prep as prep_module

    plan = make_plan(make_spec(size=(40, 24), center=SEAHORSE, width=("1e-18", "1e-20"),
                               frames=2, max_iter=20000, precision="perturb"))
    refs = plan.references()
    where: list[str] = []
    dumps = prep_module.pickle.dumps

    def recording(obj, *args, **kwargs):
        where.append(threading.current_thread().name)
        return dumps(obj, *args, **kwargs)

    monkeypatch.setattr(prep_module.pickle, "dumps", recording)
    prep = FramePrep(plan, refs, processes=3)
    assert where == [threading.current_thread().name]  # the arguments, once for all helpers
    try:
        assert prep.helpers_ready(60)
        prep.prepare(plan.frames[1]).result(timeout=60)
        assert where == [threading.current_thread().name] * 2
        deadlines: list[float] = []
        for helper in prep._helpers:  # helpers that never end their loop: killed at the deadline
            helper.ask_to_stop = lambda: None  # type: ignore[method-assign]
            stop = helper.stop
            helper.stop = lambda d, stop=stop: (deadlines.append(d), stop(d))  # type: ignore[method-assign]
    finally:
        prep.close()
    assert len(deadlines) == 3 and len(set(deadlines)) == 1  # one allowance for the three
    assert all(h._proc.poll() is not None for h in prep._helpers)


MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec")
def test_mpi_workers_with_helper_processes_write_the_same_store(write_job, tmp_path):
    """`mpiexec -n 3 python -m farm render` (two workers sharing the CPU device), each
    worker with a helper process that prepares all its frames (FARM_TEST_PREP_WAIT: the
    workers wait for their helpers to start), against one process preparing on a thread."""
    job = write_job("mpi", size=(48, 32), center=SEAHORSE, width=("1e-19", "1e-21"), frames=4,
                    max_iter=20000, tile=(32, 32))
    alone = run_farm("render", str(job), "--no-video", "--store", str(tmp_path / "alone.h5"))
    assert alone.returncode == 0, alone.stderr
    env = {**os.environ, "FARM_PREP_PROCESSES": "1", "FARM_TEST_PREP_WAIT": "1"}
    done = subprocess.run([str(MPIEXEC), "-n", "3", sys.executable, "-m", "farm", "render", str(job),
                           "--store", str(tmp_path / "mpi.h5"), "--no-video", "--quiet",
                           "--share-devices"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("helpers ready") == 2  # each worker's frames went to its helper
    assert_same_datasets(tmp_path / "alone.h5", tmp_path / "mpi.h5",
                         ("iterations", "fraction", "histogram"))


def test_a_render_with_a_helper_process_writes_the_same_store(write_job):
    """`python -m farm render` on the CPU with FARM_PREP_PROCESSES=1 (what GPUs do; the
    render waits for the helper to start, FARM_TEST_PREP_WAIT, so that every frame is
    its) against the default (a thread): the same iterations, fractions and histograms."""
    kw = dict(size=(48, 32), center=SEAHORSE, width=("1e-19", "1e-21"), frames=3,
              max_iter=20000, tile=(32, 32))
    stores = []
    for name, helpers in (("thread", "0"), ("helper", "1")):
        job = write_job(name, **kw)
        done = run_farm("render", str(job), "--no-video",
                        env={"FARM_PREP_PROCESSES": helpers, "FARM_TEST_PREP_WAIT": "1"})
        assert done.returncode == 0, done.stderr
        assert ("helpers ready" in done.stderr) == (helpers == "1")
        stores.append(job.with_suffix(".h5"))
    assert_same_datasets(*stores, ("iterations", "fraction", "histogram"))


def test_the_developer_knobs_reach_either_device(monkeypatch):
    """LaunchConfig.for_device: GPUs prepare frames in helper processes, a quarter of
    the cores and at least two (fewer where the process may use fewer than three
    cores), and take
    skips from 8 steps, CPUs on a thread from 32 steps, both with degree-4 tables; the
    knobs FARM_PREP_PROCESSES, FARM_MIN_SKIP_LEVEL and FARM_SKIP_DEGREE override each
    (on GPUs a -DBLA_MIN_LEVEL in FARM_CL_OPTIONS would not: LaunchConfig's own option
    comes later on the build's command line)."""
    from farm.compute.inventory import DeviceInfo
    from farm.compute.launch import LaunchConfig

    gpu = DeviceInfo(0, 0, "p", "gpu", "GPU", 100, 1 << 30, True, True)
    cpu = DeviceInfo(1, 0, "p", "cpu", "CPU", 2, 1 << 30, True, True)
    for name in ("FARM_PREP_PROCESSES", "FARM_MIN_SKIP_LEVEL", "FARM_SKIP_DEGREE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: set(range(16)))  # a GPU host
    got = [(c.prep_processes, c.min_skip_level, c.high_degree)
           for c in (LaunchConfig.for_device(gpu), LaunchConfig.for_device(cpu))]
    assert got == [(4, 3, True), (0, 5, True)]
    monkeypatch.setenv("FARM_PREP_PROCESSES", "3")
    monkeypatch.setenv("FARM_MIN_SKIP_LEVEL", "4")
    monkeypatch.setenv("FARM_SKIP_DEGREE", "2")
    got = [(c.prep_processes, c.min_skip_level, c.high_degree)
           for c in (LaunchConfig.for_device(gpu), LaunchConfig.for_device(cpu))]
    assert got == [(3, 4, False), (3, 4, False)]
    monkeypatch.delenv("FARM_PREP_PROCESSES")
    for cores, helpers in ((1, 0), (2, 1), (3, 2), (8, 2), (16, 4), (64, 16)):  # the renderer keeps a core
        monkeypatch.setattr("os.sched_getaffinity", lambda _pid, n=cores: set(range(n)))
        assert LaunchConfig.for_device(gpu).prep_processes == helpers


def test_a_prepared_frames_device_buffers_are_made_before_its_launch(cl_device):
    """A perturbed frame's skip table goes to the device as its preparation completes
    (on the thread that completes it), not on the launching thread: once prepare()'s
    future is done, the frame's kernel arguments exist, and its launch renders what a
    renderer that makes them at launch renders."""
    import time

    from farm.compute.render import TileRenderer

    info, dev = cl_device
    plan = make_plan(make_spec(size=(48, 27), center=SEAHORSE, width=("1e-18", "1e-20"), frames=2,
                               max_iter=20000, precision="perturb", tile=(48, 48)))
    refs = plan.references()
    renderer = TileRenderer(dev, info, plan, references=refs)
    plain = TileRenderer(dev, info, plan, references=refs)
    plain.prepare = plain._prep.prepare  # type: ignore[method-assign]  (no buffers ahead)
    try:
        for frame in plan.frames:
            renderer.prepare(frame).result()
            for _ in range(3000):  # (the callback runs just after the result is set)
                if frame.index in renderer._device_args:
                    break
                time.sleep(0.01)
            assert frame.index in renderer._device_args
            assert frame.index not in plain._device_args
            got = renderer.render(frame, plan.grid.tile(0))
            want = plain.render(frame, plan.grid.tile(0))
            assert np.array_equal(got.iterations, want.iterations)
            assert np.array_equal(got.fraction, want.fraction)
    finally:
        renderer.close()
        plain.close()


def test_a_prepared_frame_carries_its_table_once_and_only_the_columns_in_use():
    """A prepared perturbed frame goes through a helper's pipe: its skip table once, in
    the kernels' layout, without the columns that are zero in every map (a floatexp
    frame's maps are quadratic: 10 of 28 columns). A frame of a 1080p zoom to 1e-10000
    was 47.6 MB; the kernels' arguments from it are those of the full table."""
    import pickle

    from farm.compute.perturbation import perturbed_frame
    from farm.compute.prep import FrameBuilder
    from farm.numerics.bla import COLUMNS, device_layout

    plan = make_plan(make_spec(size=(64, 36), center=SEAHORSE, width=("1e-400", "1e-400"),
                               max_iter=20000, precision="perturb"))
    refs = plan.references()
    frame = plan.frames[0]
    full = perturbed_frame(plan, refs, frame)
    built = FrameBuilder(plan, refs).build(frame)
    assert built.layout is not None and len(built.table.coef) == 0
    coef, radius = built.layout
    want_coef, want_radius = device_layout(full.table)
    assert coef.shape[1] <= 10 < COLUMNS and full.table.valid.sum() > 100
    assert np.array_equal(np.pad(coef, ((0, 0), (0, COLUMNS - coef.shape[1]))), want_coef)
    assert np.array_equal(radius, want_radius)
    assert len(pickle.dumps(built)) < 0.5 * len(pickle.dumps(full))  # (it held both: 1.5x)


def test_dropped_frames_table_buffers_are_used_again(cl_device, monkeypatch):
    """The device arguments of frames past FramePrep.KEEP are dropped after a launch and
    their table buffers serve later frames of the same table size (farm/compute/render.py
    ``_Spares``: releasing them waited for the device on NVIDIA's OpenCL); every frame
    renders what a fresh renderer renders (a reused buffer holds nothing of its last
    frame), and the renderer holds no more frames' arguments than KEEP."""
    from farm.compute.render import TileRenderer

    info, dev = cl_device
    monkeypatch.setattr(FramePrep, "KEEP", 2)
    plan = make_plan(make_spec(size=(48, 27), center=SEAHORSE, width=("1e-18", "2e-19"), frames=8,
                               max_iter=20000, precision="perturb", tile=(48, 48)))
    refs = plan.references()
    renderer = TileRenderer(dev, info, plan, references=refs)
    spares, reused = renderer._spares, []
    take = spares.take

    def counted(nbytes: int):
        buf = take(nbytes)
        reused.append(buf is not None)
        return buf
    monkeypatch.setattr(spares, "take", counted)
    try:
        for frame in plan.frames:
            got = renderer.render(frame, plan.grid.tile(0))
            assert len(renderer._device_args) <= FramePrep.KEEP
            fresh = TileRenderer(dev, info, plan, references=refs)
            try:
                want = fresh.render(frame, plan.grid.tile(0))
            finally:
                fresh.close()
            assert np.array_equal(got.iterations, want.iterations), frame.index
            assert np.array_equal(got.fraction, want.fraction), frame.index
        assert sum(reused) >= 2 * (len(plan.frames) - FramePrep.KEEP - 1)
    finally:
        renderer.close()
