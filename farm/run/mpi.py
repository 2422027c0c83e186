"""A render under ``mpiexec -n N``: rank 0 prepares the store and runs the master, ranks
1..N-1 bind a device of their node each and work; the plan and references reach them by
broadcast (farm/schedule/transport.py).

On several nodes the video is made where the frames are: each worker rank colours and
encodes a share of it (farm/encode/shares.py) in a sink process of its node that follows
the store while the frames render (farm/encode/process.py), and rank 0 joins the shares
once the render has ended (farm/run/mpi_encode.py's join_shares). On one node the master's
sink process makes the whole video, as in one process.

Workers that see the store (a shared file system: a token beside it, farm/store/shared.py)
write their tiles into it themselves and send the master only each tile's record, once
its bytes are durable (farm/store/inplace.py); the others send the bytes, as before."""


from __future__ import annotations

import contextlib
import dataclasses
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from farm.compute import clstart
from farm.compute.device import DeviceInfo, bind_device, bind_local
from farm.compute.render import TileRenderer
from farm.errors import DeviceError, FarmError, UsageError
from farm.plan import Plan
from farm.plan.reference_pack import pack, unpack
from farm.plan.reference_types import References
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
from farm.runtime.timeline import MasterTiming
from farm.schedule import transport
from farm.schedule.master import STOP_SIGNALS
from farm.schedule.packer import Packer, pack_threads
from farm.schedule.worker import run_worker
from farm.store import shared
from farm.store.codec import Codec
from farm.store.inplace import SlotWriter
from farm.store.lock import StoreLock

if TYPE_CHECKING:
    from farm.encode.process import SinkProcess
    from farm.encode.shares import ShareReport, Shares


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
    # on several nodes the video is made by every worker's node, a share each, while the
    # frames render, not by the master's host alone
    spread = options.video and len(set(comm.allgather(host))) > 1
    video_comm, share = None, None
    checked = options  # the video path is checked before any work, wherever it is made
    if spread:
        options = dataclasses.replace(options, video=False)
        # the video's messages on a communicator of their own: the master's link drains
        # every message of `comm` at its end, and would take a worker's first one
        video_comm = comm.Dup()
        if comm.Get_rank() != 0:
            from farm.encode.process import SinkProcess

            share = SinkProcess()  # started first: forking after the GPU's context costs
    bound, problem = None, None
    if comm.Get_rank() != 0:
        try:
            bound = bind_device(options.device, local_index, options.share_devices)
            clstart.prepare_contexts([bound[1]])  # while the master computes the references
        except FarmError as err:
            problem = (type(err).__name__, f"rank {comm.Get_rank()} on {host}: {err}")
    problems = [p for p in transport.quiet_gather(comm, problem) or [] if p]
    if comm.Get_rank() != 0:
        return _worker_rank(comm, video_comm, share, bound, local_workers)
    plan, refs, codec, offer = None, None, None, None
    held = contextlib.ExitStack()  # the store's lock, from the path check to the video
    held.callback(clstart.release_unused)  # the pre-pass's context (_prepass_here), at the end
    try:
        if problems:
            kind = UsageError if all(k == "UsageError" for k, _ in problems) else DeviceError
            raise kind("; ".join(text for _, text in problems))
        spec, store_path, video = job()
        check_paths(store_path, video, checked)
        timing = MasterTiming()
        sink = spawn_sink(options)
        if sink is not None:
            held.callback(sink.abort)  # unless the render ends well: master_session finishes it
        held.enter_context(StoreLock(store_path))
        plan, refs, codec = prepare_store(spec, store_path, options.restart, options.progress,
                                          options.check_space, timing,
                                          prepass_device=_prepass_here(options.device))
        offer = _offer(store_path)
        held.callback(shared.withdraw, store_path)
        session = Session(plan, store_path, options, timing,
                           open_sink(sink, spec, store_path, video), job=spec, video=video)
    except BaseException:
        plan = None  # the workers go home
        held.close()
        raise
    finally:
        transport.quiet_bcast(comm, (plan, codec, offer))  # a None plan tells the workers to go home
    with held:
        _bcast_references(comm, refs)
        in_place = spread and video_in_place(session)
        shares = _share_out(video_comm, session, in_place) if spread else None
        if shares is not None:  # finished (joined) or aborted as the session's video sink
            session.sink = held.enter_context(NodeShares(video_comm, session, shares))
        link = transport.MpiMaster(comm, plan.channels)
        print(f"farm: master on {host}, {len(link.workers)} worker(s)", file=sys.stderr)
        try:
            report = master_session(session, link, len(link.workers))
            if report is not None and report.tiles and options.progress:
                print(f"farm: the workers wrote {report.in_place} of the {report.tiles} tile(s) into "
                      "the store themselves", file=sys.stderr)
        finally:
            for w in link.workers:  # idempotent: workers already released ignore it
                link.release(w)
            link.drain()
        status = finish(report, session)
        if spread and shares is None and not in_place:
            _still(session)
        return status


def _worker_rank(comm, video_comm, share: SinkProcess | None, bound, local_workers: int) -> int:
    """A worker rank from the plan's broadcast to the end: its tiles, and on several nodes
    its share of the video (made as the frames complete, finished once the master says
    the render has ended well)."""
    plan, shares = None, None
    try:
        try:
            plan, codec, offer = transport.quiet_bcast(comm)
            if plan is not None:
                refs = _bcast_references(comm, None)
                if video_comm is not None:
                    assert share is not None
                    shares = _share_in(video_comm, share)
                if bound is not None:
                    _mpi_worker(comm, plan, refs, codec, bound, local_workers, offer)
        finally:
            clstart.release_unused()
        if shares is not None:  # every worker answers, those without a segment too
            made = transport.quiet_bcast(video_comm)  # the master: did the render end well?
            if share is not None and not shares.owned(comm.Get_rank() - 1):
                share.abort()  # (it was given no segment)
                share = None
            transport.quiet_gather(video_comm, _finish_share(share, made))
            share = None
    finally:
        if share is not None:
            share.abort()
    return 0


def _share_out(comm, session: Session, in_place: bool) -> Shares | None:
    """Rank 0, the store prepared: cut the video into shares for the worker ranks and
    send them out. What a frame will cost is not known yet (the deep end of a zoom often
    twice the start), so each rank gets shares.ROUNDS segments from all over the film, of
    equal frames for its cores (farm/encode/shares.py, cut). None, and the workers'
    sinks go home, where the video is in place already or the film is a still."""
    from farm.encode import VideoSettings
    from farm.encode.shares import ROUNDS, capacities, cores_here, cut
    from farm.store.reader import Store

    ranks = transport.quiet_gather(comm, cores_here()) or []
    shares = None
    try:
        if len(session.plan.video_frames) > 1 and not in_place:
            assert session.job is not None and session.video is not None
            with Store(session.store_path) as store:
                shares = cut(store, session.store_path, session.job.color,
                             VideoSettings.from_spec(session.job, session.video),
                             capacities(ranks[1:]), None, rounds=ROUNDS)
    finally:
        transport.quiet_bcast(comm, shares)
    return shares


def _share_in(comm, share: SinkProcess) -> Shares | None:
    """A worker rank: the video's shares from rank 0 (None: no video to share); this
    rank's segments, if the film has some for it, go to its sink process."""
    from farm.encode.shares import cores_here

    transport.quiet_gather(comm, cores_here())
    shares = transport.quiet_bcast(comm)
    r = comm.Get_rank() - 1
    if shares is not None and shares.owned(r):
        share.follow_share(shares, r)
    return shares


def _finish_share(share: SinkProcess | None, made: bool) -> ShareReport:
    """The report for rank 0 of this rank's segments (``share``: None where it has none;
    the seconds: those its sink took after the render ended)."""
    import time

    from farm.encode.shares import ShareReport

    t0 = time.perf_counter()
    if share is None or not made:
        if share is not None:
            share.abort()
        return ShareReport(None, 0.0)
    try:
        share.finish()
    except FarmError as err:
        return ShareReport.failed(err, time.perf_counter() - t0)
    except BaseException:
        share.abort()
        raise
    return ShareReport(None, time.perf_counter() - t0, share.color_s, share.write_s, share.written)


class NodeShares:
    """Rank 0's video sink on several nodes, in the master session's place for one
    (farm/run/session.py): the workers' sinks follow the store themselves, so
    ``frame_complete`` has nothing to do; ``finish`` (the render complete, the store not
    yet compacted, the workers released) tells them to finish and joins their shares.
    Otherwise they drop theirs when the ``with`` block is left: only then, since a render
    that failed may not have released its workers yet (the master's caller does)."""

    local = False  # nodes that read the store finish before it is compacted (renamed over)

    def __init__(self, comm, session: Session, shares: Shares):
        self._comm, self._session, self._shares = comm, session, shares
        self._told = False
        self.color_s = self.write_s = 0.0
        self.written = 0

    def frame_complete(self, f: int) -> None:
        pass

    def _tell(self, made: bool) -> list:
        self._told = True
        transport.quiet_bcast(self._comm, made)
        return transport.quiet_gather(self._comm, None) or []

    def finish(self) -> Path:
        from farm.encode import VideoSettings
        from farm.run.mpi_encode import join_shares

        job, video = self._session.job, self._session.video
        assert job is not None and video is not None
        reports = self._tell(True)
        done = [r for r in reports[1:] if not r.why]
        self.color_s = max((r.color_s for r in done), default=0.0)  # the slowest node's
        self.write_s = max((r.write_s for r in done), default=0.0)
        self.written = sum(r.written for r in done)
        return join_shares(self._shares, reports, VideoSettings.from_spec(job, Path(video)),
                           self._session.options.progress, first_rank=1)

    def abort(self) -> None:
        pass  # at the with block's end

    def __enter__(self) -> NodeShares:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._told:
            self._tell(False)


def _still(session: Session) -> None:
    """Rank 0: a one-frame film's image, once its render is complete."""
    from farm.encode import VideoSettings, encode_video, record

    assert session.job is not None and session.video is not None
    path = encode_video(session.store_path, session.job.color,
                        VideoSettings.from_spec(session.job, Path(session.video)),
                        progress=session.options.progress)
    record.remember(session.store_path, path, session.job)
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


def _offer(store_path) -> shared.Offer | None:
    """Rank 0: the store offered to the workers to write their tiles into (a token beside
    it), unless it is compacted (it has no slots; resuming it with --verify rewrites it)."""
    from farm.store import compact

    return None if compact.is_compact(store_path) else shared.offer(store_path)


def _open_slots(offer: shared.Offer | None, plan: Plan, rank: int) -> SlotWriter | None:
    """A worker rank: the store to write its tiles into, where it sees the master's, else
    None (it says why, unless the master wrote no token)."""
    why = shared.check(offer)
    if why is None:
        assert offer is not None
        try:
            return SlotWriter(offer.store, plan, offer.length)
        except (OSError, FarmError) as err:
            why = str(err)
    if offer is not None:
        print(f"farm: rank {rank} sends its tiles to the master: {why}", file=sys.stderr)
    return None


def _mpi_worker(comm, plan: Plan, refs: References | None, codec: Codec,
                bound: tuple[DeviceInfo, Any], local_workers: int,
                offer: shared.Offer | None = None) -> None:
    """A worker rank, packing its tiles on its share of the node's cores, and writing
    them into the store where it sees it (``offer``). Launchers (mpiexec, srun) pass
    stop signals to every rank: workers ignore them and stop when the master, which
    collects the tiles in flight, says so."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    info, device = bound
    slots = _open_slots(offer, plan, comm.Get_rank())
    packer = Packer(plan, codec, pack_threads(1, processes=local_workers), slots=slots)
    try:
        run_worker(plan, lambda: TileRenderer(device, info, plan, slots=1, references=refs,
                                              shuffle=codec.compressed),  # the others: run_worker
                   transport.MpiWorker(comm), packer)
    finally:
        packer.close()
        if slots is not None:
            slots.close()
