"""``mpiexec -n N farm encode STORE``: a finished store's video made by every rank, a share each.

The film is cut into N shares of consecutive frames of about equal stored bytes, in
proportion to the cores each rank has (farm/encode/shares.py). Rank k colours segment
k's frames from the store and encodes them with its own cores into the segment's
MPEG-TS stream beside the video; rank 0's share included. Rank 0 then joins the streams
by stream copy (:func:`farm.encode.segments.join`, the one-machine join: one encoder's
time scale and timestamps) and muxes the soundtrack (:func:`join_shares`, which a render
on several nodes uses too: farm/run/mpi.py). Every rank reads the store and writes
beside the video, so both must be on a file system the ranks share.

Every rank sizes its frame threads and x264's threads by the cores it may use (its CPU
affinity: farm/runtime/cores.py), so ranks bound to a node's cores (Slurm's
``--cpus-per-task``, or ``taskset`` on one machine) share the node without crowding.
The codec is chosen once, by rank 0, so that the segments join. Ranks wait for each
other sleeping (farm/schedule/transport.py's quiet collectives), not polling a core.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

from farm.encode import check_complete, check_video
from farm.encode.audio import mux
from farm.encode.ffmpeg import EncodeError, VideoSettings
from farm.encode.segments import join
from farm.encode.shares import (
    ShareGroup,
    ShareReport,
    Shares,
    capacities,
    cores_here,
    cut,
    frame_weights,
    segment_file,
)
from farm.runtime.media import track_seconds
from farm.schedule.transport import quiet_bcast, quiet_gather
from farm.spec import Color
from farm.store.reader import Store


def lead(comm, store_path: str | os.PathLike[str], color: Color, video: VideoSettings,
         progress: bool = True) -> Path:
    """Rank 0: check the store and the outputs, give every rank its share, encode its
    own, join the segments and mux the soundtrack. The video's path. A one-frame store
    is a still: rank 0 writes it alone."""
    from farm.encode import encode_video

    capacity = quiet_gather(comm, cores_here())
    try:
        with Store(store_path) as store:
            check_complete(store, range(store.frames), color.smoothing)
            frames = store.frames
            check_video(store_path, color, video.path)
            shares = (cut(store, store_path, color, video, capacities(capacity), frame_weights(store))
                      if frames > 1 else None)
    except BaseException:
        quiet_bcast(comm, None)  # the other ranks go home
        raise
    quiet_bcast(comm, shares)
    if shares is None:  # a still
        return encode_video(store_path, color, video, progress=progress)
    reports = quiet_gather(comm, _encode_share(shares, 0, progress)) or []
    return join_shares(shares, reports, video, progress)


def join_shares(shares: Shares, reports: list[ShareReport], video: VideoSettings,
                progress: bool, first_rank: int = 0) -> Path:
    """Rank 0, every rank's report in (rank ``first_rank + r`` made the segments
    ``shares.owned(r)``): join the segments by stream copy and mux the soundtrack; or,
    where a share failed, remove them all and say which rank failed and why."""
    parts = [segment_file(shares, k) for k in range(shares.segments)]
    mine = [(first_rank + r, shares.owned(r), report) for r, report in enumerate(reports[first_rank:])
            if shares.owned(r)]
    failed = [(rank, report.why) for rank, _, report in mine if report.why]
    if progress and not failed:
        print("farm: video shares: " + ", ".join(
            f"rank {rank} {sum(shares.cuts[k + 1] - shares.cuts[k] for k in owned)} frames"
            f"{_frames_text(shares, owned)} in {report.seconds:.1f} s"
            for rank, owned, report in mine), file=sys.stderr)
    if failed:
        _remove(parts)
        rank, why = failed[0]
        raise EncodeError(f"rank {rank} could not encode its share of the video: {why}")
    joined = join(parts, shares.video.path, video.fps)
    if video.audio is None:
        return joined
    try:
        return mux(joined, video.audio, video.path, shares.cuts[-1] / video.fps,
                   track_seconds(video.audio))
    finally:
        _remove([joined])


def _frames_text(shares: Shares, owned: list[int]) -> str:
    """" (frames a-b)" for a rank of one segment, "" for several."""
    if len(owned) != 1:
        return ""
    return f" ({shares.cuts[owned[0]]}-{shares.cuts[owned[0] + 1] - 1})"


def decline(comm) -> None:
    """Rank 0, where there is no video to share (bad input, an interrupted render, a
    video in place): the other ranks, waiting in :func:`follow`, go home."""
    quiet_gather(comm, cores_here())
    quiet_bcast(comm, None)


def follow(comm) -> None:
    """Ranks 1..N-1: wait for rank 0's shares (None: nothing to do), encode this rank's,
    and say how it went."""
    quiet_gather(comm, cores_here())
    shares = quiet_bcast(comm)
    if shares is not None:
        quiet_gather(comm, _encode_share(shares, comm.Get_rank(), False))


def _encode_share(shares: Shares, rank: int, progress: bool) -> ShareReport:
    """Encode the segments of ``rank`` (none where the film has fewer segments than
    ranks), and say how it went."""
    t0 = time.perf_counter()
    if not shares.owned(rank):
        return ShareReport(None, 0.0)
    try:
        sink = ShareGroup(shares, rank, progress)
        try:
            for f in range(shares.cuts[-1]):  # the store is complete: every frame, for the
                sink.frame_complete(f)         # colour statistics' window too
            sink.finish()
        except BaseException:
            sink.abort()
            raise
    except Exception as err:  # (an interrupt ends the rank; mpiexec ends the others)
        return ShareReport.failed(err, time.perf_counter() - t0)
    return ShareReport(None, time.perf_counter() - t0)


def _remove(paths: list[Path]) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

