"""``mpiexec -n N farm encode STORE``: a finished store's video made by every rank, a share each.

The film is cut into N segments of consecutive frames (:func:`farm.encode.segments.boundaries`,
fewer when the film is short), of stored bytes (:func:`_frame_weights`: the deep end of a
zoom costs more a frame than its start) in proportion to the cores each rank has
(:func:`_capacities`: a master and a worker sharing a node's cores get half each). Rank k
colours segment k's frames from the store (the colour statistics read the store too, so
a share needs nothing from the others) and encodes them with its own cores into the
segment's MPEG-TS stream beside the video, its timestamps starting where the segment
starts; rank 0's share included. Rank 0 then joins the streams by stream copy
(:func:`farm.encode.segments.join`, the one-machine join: one encoder's time scale and
timestamps) and muxes the soundtrack. Every rank reads the store and writes beside the
video, so both must be on a file system the ranks share.

Every rank sizes its frame threads and x264's threads by the cores it may use (its CPU
affinity: farm/runtime/cores.py), so ranks bound to a node's cores (Slurm's
``--cpus-per-task``, or ``taskset`` on one machine) share the node without crowding.
The codec is chosen once, by rank 0, so that the segments join. Ranks wait for each
other sleeping (farm/schedule/transport.py's quiet collectives), not polling a core.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from farm.color import Style
from farm.encode import check_complete, check_video
from farm.encode.audio import mux, silent_path
from farm.encode.ffmpeg import EncodeError, VideoSettings, choose_codec, even_size
from farm.encode.segments import boundaries, join, segment_output, segment_path
from farm.encode.sink import FrameSink
from farm.runtime.media import track_seconds
from farm.schedule.transport import quiet_bcast, quiet_gather
from farm.spec import Color
from farm.store.reader import Store


@dataclass(frozen=True)
class Shares:
    """What every rank needs to encode its share (broadcast by rank 0)."""

    store: str
    color: Color
    video: VideoSettings  # the (silent, where a soundtrack follows) video the segments make
    codec: str
    size: tuple[int, int]
    cuts: list[int]  # segment k: frames cuts[k] .. cuts[k + 1] - 1


def lead(comm, store_path: str | os.PathLike[str], color: Color, video: VideoSettings,
         progress: bool = True) -> Path:
    """Rank 0: check the store and the outputs, give every rank its share, encode its
    own, join the segments and mux the soundtrack. The video's path. A one-frame store
    is a still: rank 0 writes it alone."""
    from farm.encode import encode_video

    capacity = quiet_gather(comm, _cores_here())
    try:
        with Store(store_path) as store:
            check_complete(store, range(store.frames), color.smoothing)
            frames, size = store.frames, store.spec.size
            weights = _frame_weights(store)
        check_video(store_path, color, video.path)
        shares = None
        if frames > 1:
            silent = replace(video, path=silent_path(video.path), audio=None) if video.audio else video
            even = even_size(*size)
            shares = Shares(str(store_path), color, silent, choose_codec(video.codec, *even), size,
                            boundaries(frames, comm.Get_size(), video.fps, weights,
                                       _capacities(capacity)))
    except BaseException:
        quiet_bcast(comm, None)  # the other ranks go home
        raise
    quiet_bcast(comm, shares)
    if shares is None:  # a still
        return encode_video(store_path, color, video, progress=progress)
    reports = quiet_gather(comm, _encode_share(shares, 0, progress)) or []
    parts = [segment_path(shares.video.path, k) for k in range(len(shares.cuts) - 1)]
    failed = [(rank, why) for rank, (why, _) in enumerate(reports) if why]
    if progress and not failed:
        print("farm: video shares: " + ", ".join(
            f"rank {k} frames {shares.cuts[k]}-{shares.cuts[k + 1] - 1} in {seconds:.1f} s"
            for k, (_, seconds) in enumerate(reports) if k < len(parts)), file=sys.stderr)
    if failed:
        _remove(parts)
        rank, why = failed[0]
        raise EncodeError(f"rank {rank} could not encode its share of the video: {why}")
    joined = join(parts, shares.video.path, video.fps)
    if video.audio is None:
        return joined
    try:
        return mux(joined, video.audio, video.path, frames / video.fps, track_seconds(video.audio))
    finally:
        _remove([joined])


def _frame_weights(store: Store) -> np.ndarray | None:
    """What each frame costs to colour and encode, about: its stored bytes (a frame of
    fine detail compresses less, and x264 takes longer over it; the deep end of a zoom
    is often twice the start). None where the store does not say (raw stores; an expmap
    store's tiles are strips, not frames): then equal shares."""
    if store.expmap or "tiles/bytes" not in store.file:
        return None
    stored = np.asarray(store.file["tiles/bytes"][...], np.float64)
    return stored.reshape(stored.shape[0], -1).sum(axis=1)


def decline(comm) -> None:
    """Rank 0, where there is no video to share (bad input, an interrupted render, a
    video in place): the other ranks, waiting in :func:`follow`, go home."""
    quiet_gather(comm, _cores_here())
    quiet_bcast(comm, None)


def _cores_here() -> tuple[str, frozenset[int]]:
    """This rank's node (FARM_NODE, else the host) and the cores it may use."""
    return (os.environ.get("FARM_NODE") or socket.gethostname(), frozenset(os.sched_getaffinity(0)))


def _capacities(ranks: list[tuple[str, frozenset[int]]]) -> list[float]:
    """Each rank's share of its node's cores: a core counts 1/n for each of the n ranks of
    the node that may use it (a master and a worker on one node's cores get half each)."""
    users: dict[tuple[str, int], int] = {}
    for node, cores in ranks:
        for core in cores:
            users[node, core] = users.get((node, core), 0) + 1
    return [sum(1 / users[node, core] for core in cores) for node, cores in ranks]


def follow(comm) -> None:
    """Ranks 1..N-1: wait for rank 0's shares (None: nothing to do), encode this rank's,
    and say how it went."""
    quiet_gather(comm, _cores_here())
    shares = quiet_bcast(comm)
    if shares is not None:
        quiet_gather(comm, _encode_share(shares, comm.Get_rank(), False))


def _encode_share(shares: Shares, rank: int, progress: bool) -> tuple[str | None, float]:
    """Encode segment ``rank`` (nothing where the film has fewer segments than ranks):
    None or why it failed (one line), and the seconds it took."""
    t0 = time.perf_counter()
    if rank >= len(shares.cuts) - 1:
        return None, 0.0
    try:
        output = segment_output(shares.video, shares.codec, shares.size, shares.cuts, rank)
        frames = range(shares.cuts[rank], shares.cuts[rank + 1])
        sink = FrameSink(shares.store, output, Style.from_settings(shares.color), shares.color.smoothing,
                         frames, progress=progress)
        try:
            for f in range(shares.cuts[-1]):  # the store is complete: every frame, for the
                sink.frame_complete(f)         # colour statistics' window too
            sink.finish()
        except BaseException:
            sink.abort()
            raise
    except Exception as err:  # (an interrupt ends the rank; mpiexec ends the others)
        lines = str(err).strip().splitlines() or traceback.format_exception_only(err)
        return lines[0].strip(), time.perf_counter() - t0
    return None, time.perf_counter() - t0


def _remove(paths: list[Path]) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

