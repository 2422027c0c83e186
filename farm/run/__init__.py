"""Render and resume: from a job spec (or a store) to a complete store and a video.

One process: the master runs in the main thread and one worker thread per device
(every GPU the device selector gives, or one CPU device). Under ``mpiexec -n N``:
rank 0 is the master and the store's only writer, ranks 1..N-1 are workers, each
bound to one device of its node. Both paths share the master and worker loops, so
they produce the same store bit for bit.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from farm import spec as specmod
from farm.compute import clstart
from farm.compute.device import DeviceInfo, bind_local
from farm.compute.launch import LaunchConfig
from farm.compute.prep import FramePrep, close_helpers, spawn_helpers
from farm.compute.render import TileRenderer
from farm.compute.render import build_ahead as render_programs_ahead
from farm.plan import Plan
from farm.plan.reference_types import References
from farm.runtime.timeline import MasterTiming
from farm.schedule import transport
from farm.schedule.master import MasterReport
from farm.schedule.packer import Packer, pack_threads
from farm.schedule.worker import run_worker
from farm.store.codec import Codec
from farm.store.lock import StoreLock
from farm.store.reader import Store

if TYPE_CHECKING:
    from farm.run.early_refs import EarlyReferences
from farm.run.mpi import render_mpi
from farm.run.prepare import compute_reference, prepare_store, prepass_device
from farm.run.session import (
    RenderOptions,
    Session,
    check_paths,
    finish,
    master_session,
    open_sink,
    spawn_sink,
)

__all__ = ["RenderOptions", "compute_reference", "prepare_store", "render", "resume"]


def _run_in_process(session: Session, refs: References | None, codec: Codec,
                    bound: list[tuple[DeviceInfo, Any]], helpers: list) -> MasterReport | None:
    """The master in this thread, one worker thread per device (every GPU of the
    machine: tiles reach the writer by reference, and no launcher starts processes),
    and one packer whose threads pack every worker's tiles."""
    plan = session.plan
    session.announce = [f"farm: rendering on {info.describe()}" for info, _ in bound]
    ranks = list(range(len(bound)))
    link = transport.ThreadMaster(ranks)
    # each frame's host work once, for every GPU (in helper processes where GPUs render)
    configs = [LaunchConfig.for_device(i) for i, _ in bound]
    prep = FramePrep(plan, refs, threads=len(bound), high_degree=all(c.high_degree for c in configs),
                     helpers=helpers)
    packer = Packer(plan, codec, pack_threads(len(bound)))
    threads = []
    for rank, (info, device) in zip(ranks, bound, strict=True):
        def make(info: DeviceInfo = info, device: Any = device) -> TileRenderer:
            # one slot to begin with: run_worker makes the others beside the first launches
            return TileRenderer(device, info, plan, slots=1, references=refs, prep=prep,
                                shuffle=codec.compressed)
        threads.append(threading.Thread(target=run_worker, name=f"farm-worker-{rank}", daemon=True,
                                        args=(plan, make, link.link(rank), packer)))
    for t in threads:
        t.start()
    try:
        return master_session(session, link, len(bound))
    finally:
        for rank, t in zip(ranks, threads, strict=True):
            link.release(rank)
            t.join(timeout=10)
        packer.close()
        prep.close()


def render(spec: specmod.JobSpec, store: str | None = None, video: str | None = None,
           options: RenderOptions = RenderOptions(), early: EarlyReferences | None = None) -> int:
    """``farm render``: create or resume the store, render what is missing, encode;
    ``early``: the job's references being computed beside the start (farm/run/early_refs.py)."""
    store_path = Path(store or spec.output.store)
    video = video or spec.output.video
    comm = transport.mpi_world()
    if comm is not None:
        return render_mpi(comm, lambda: (spec, store_path, video), options)
    check_paths(store_path, video, options)
    timing = MasterTiming()
    sink = spawn_sink(options)
    helpers: list = []
    try:
        bound = bind_local(options.device, options.workers)  # before anything is written
        clstart.prepare_contexts([device for _, device in bound])  # beside the reference orbit
        # frame preparation's helper processes (GPUs) start now: their imports overlap the
        # store's preparation (the reference orbit, the store's creation)
        configs = [LaunchConfig.for_device(i) for i, _ in bound]
        helpers = spawn_helpers(max(c.prep_processes for c in configs) * len(bound))
        built: list = []  # programs built ahead, held until the renderers have them

        def build_ahead(plan: Plan, codec: Codec) -> None:
            for info, device in bound:
                try:
                    built.extend(render_programs_ahead(device, info, plan, codec.compressed))
                except Exception:  # (it fails again in the renderer, which says so as before)
                    continue

        with StoreLock(store_path):
            plan, refs, codec = prepare_store(spec, store_path, options.restart, options.progress,
                                              options.check_space, timing, helpers, early,
                                              # (without the early references, the context
                                              # is made beside this process's own orbit instead)
                                              meanwhile=build_ahead if early is not None else None,
                                              prepass_device=prepass_device(bound))
            session = Session(plan, store_path, options, timing,
                               open_sink(sink, spec, store_path, video), job=spec, video=video)
            taken, helpers = helpers, []  # the FramePrep stops them
            return finish(_run_in_process(session, refs, codec, bound, taken), session)
    except BaseException:
        close_helpers(helpers)
        if sink is not None:
            sink.abort()
        raise
    finally:
        clstart.release_unused()


def resume(store: str, video: str | None = None, options: RenderOptions = RenderOptions()) -> int:
    """``farm resume STORE``: continue the job the store holds."""
    store_path = Path(store)

    def job() -> tuple[specmod.JobSpec, Path, str]:
        with Store(store_path) as s:
            return s.spec, store_path, video or s.spec.output.video

    comm = transport.mpi_world()
    if comm is not None:
        return render_mpi(comm, job, options)
    spec, _, video_path = job()  # the stored spec: prepare_store finds the same job and resumes
    return render(spec, store=store, video=video_path, options=dataclasses.replace(options, restart=False))


