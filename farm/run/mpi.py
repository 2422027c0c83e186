"""A render under ``mpiexec -n N``: rank 0 prepares the store and runs the master, ranks
1..N-1 bind a device of their node each and work; the plan and references reach them by
broadcast (farm/schedule/transport.py)."""


from __future__ import annotations

import contextlib
import dataclasses
import signal
import sys
from typing import TYPE_CHECKING, Any

from farm.compute import clstart
from farm.compute.device import DeviceInfo, bind_device, bind_local
from farm.compute.render import TileRenderer
from farm.errors import DeviceError, FarmError, UsageError
from farm.plan import Plan
from farm.plan.reference_pack import pack, unpack
from farm.plan.reference_types import References
from farm.runtime.timeline import MasterTiming
from farm.schedule import transport
from farm.schedule.master import STOP_SIGNALS
from farm.schedule.packer import Packer, pack_threads
from farm.schedule.worker import run_worker
from farm.store.codec import Codec
from farm.store.lock import StoreLock

if TYPE_CHECKING:
    pass
from farm.run.prepare import prepare_store, prepass_device
from farm.run.session import (
    RenderOptions,
    Session,
    check_paths,
    finish,
    master_session,
    open_sink,
    spawn_sink,
    video_in_place,
)


def _bcast_references(comm, refs: References | None) -> References | None:
    """References from rank 0 to every rank: metadata pickled, the orbits as one
    buffer."""
    meta, orbits = pack(refs) if refs is not None else (None, None)
    meta = transport.quiet_bcast(comm, meta)
    if meta is None:
        return None
    orbits = transport.bcast_array(comm, orbits)
    assert orbits is not None
    return unpack(meta, orbits)


def render_mpi(comm, job, options: RenderOptions) -> int:
    """Rank 0: prepare, broadcast the plan, run the master. Others: work.

    Before anything is written, every worker binds its device and the master hears
    of any that cannot (too many workers for the node's GPUs, a missing driver)."""
    local_index, local_workers, host = transport.node_worker_index(comm)
    # on several nodes the video is made after the render by every rank, a share each
    # (farm/run/mpi_encode.py), not by the master's host alone while the frames render
    spread = options.video and len(set(comm.allgather(host))) > 1
    video_comm = None
    if spread:
        options = dataclasses.replace(options, video=False)
        # the video's messages on a communicator of their own: the master's link drains
        # every message of `comm` at its end, and would take a worker's first one
        video_comm = comm.Dup()
    bound, problem = None, None
    if comm.Get_rank() != 0:
        try:
            bound = bind_device(options.device, local_index, options.share_devices)
            clstart.prepare_contexts([bound[1]])  # while the master computes the references
        except FarmError as err:
            problem = (type(err).__name__, f"rank {comm.Get_rank()} on {host}: {err}")
    problems = [p for p in transport.quiet_gather(comm, problem) or [] if p]
    if comm.Get_rank() != 0:
        try:
            plan, codec = transport.quiet_bcast(comm)
            if plan is not None:
                refs = _bcast_references(comm, None)
                if bound is not None:
                    _mpi_worker(comm, plan, refs, codec, bound, local_workers)
        finally:
            clstart.release_unused()
        if plan is not None and spread:
            from farm.run.mpi_encode import follow

            follow(video_comm)
        return 0
    plan, refs, codec = None, None, None
    held = contextlib.ExitStack()  # the store's lock, from the path check to the video
    held.callback(clstart.release_unused)  # the pre-pass's context (_prepass_here), at the end
    try:
        if problems:
            kind = UsageError if all(k == "UsageError" for k, _ in problems) else DeviceError
            raise kind("; ".join(text for _, text in problems))
        spec, store_path, video = job()
        check_paths(store_path, video, options)
        timing = MasterTiming()
        sink = spawn_sink(options)
        if sink is not None:
            held.callback(sink.abort)  # unless the render ends well: master_session finishes it
        held.enter_context(StoreLock(store_path))
        plan, refs, codec = prepare_store(spec, store_path, options.restart, options.progress,
                                          options.check_space, timing,
                                          prepass_device=_prepass_here(options.device))
        session = Session(plan, store_path, options, timing,
                           open_sink(sink, spec, store_path, video), job=spec, video=video)
    except BaseException:
        held.close()
        raise
    finally:
        transport.quiet_bcast(comm, (plan, codec))  # a None plan tells the workers to go home
    with held:
        _bcast_references(comm, refs)
        link = transport.MpiMaster(comm, plan.channels)
        print(f"farm: master on {host}, {len(link.workers)} worker(s)", file=sys.stderr)
        led = False
        try:
            try:
                report = master_session(session, link, len(link.workers))
            finally:
                for w in link.workers:  # idempotent: workers already released ignore it
                    link.release(w)
                link.drain()
            status = finish(report, session)
            if spread:
                led = True
                _video_on_every_node(video_comm, session, spec, video)
            return status
        finally:
            if spread and not led:
                from farm.run.mpi_encode import decline

                decline(video_comm)  # no video to share: the workers go home


def _video_on_every_node(comm, session, spec, video: str) -> None:
    """The render is complete: every rank colours and encodes a share of the video, rank
    0 joins (farm/run/mpi_encode.py); nothing when the video is in place already."""
    from pathlib import Path

    from farm.encode import VideoSettings, record
    from farm.run.mpi_encode import decline, lead

    if video_in_place(session):  # (the session has this job and video path)
        decline(comm)
        return
    path = lead(comm, session.store_path, spec.color, VideoSettings.from_spec(spec, Path(video)),
                progress=session.options.progress)
    record.remember(session.store_path, path, spec)
    print(f"farm: wrote {path}", file=sys.stderr)


def _prepass_here(selector: str) -> Any:
    """A device on the master's node for ``max = "auto"``'s escape pre-pass (its GPU,
    else its CPU device), as one process has: without one the pre-pass runs in numpy on
    one core (4.2 s of a 4-node start-up against 0.97 s in one process, H200 host). None
    where the master's node has no usable OpenCL device."""
    try:
        device = prepass_device(bind_local(selector))
    except FarmError:
        return None
    clstart.prepare_contexts([device])  # on a thread, beside the references (released at the end)
    return device


def _mpi_worker(comm, plan: Plan, refs: References | None, codec: Codec,
                bound: tuple[DeviceInfo, Any], local_workers: int) -> None:
    """A worker rank, packing its tiles on its share of the node's cores. Launchers
    (mpiexec, srun) pass stop signals to every rank: workers ignore them and stop when
    the master, which collects the tiles in flight, says so."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    info, device = bound
    packer = Packer(plan, codec, pack_threads(1, processes=local_workers))
    try:
        run_worker(plan, lambda: TileRenderer(device, info, plan, slots=1, references=refs,
                                              shuffle=codec.compressed),  # the others: run_worker
                   transport.MpiWorker(comm), packer)
    finally:
        packer.close()
