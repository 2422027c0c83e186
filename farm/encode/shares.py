"""A video cut into shares of consecutive frames, one a rank, each coloured and encoded
where that rank runs: what a share is, how the film is cut, and one share's encoder.

The film is cut into segments of consecutive frames (:func:`farm.encode.segments.boundaries`)
of about equal cost (:func:`frame_weights`: stored bytes; the deep end of a zoom costs
more a frame than its start) in proportion to the cores each rank has (:func:`capacities`:
a master and a worker sharing a node's cores get half each). A share's sink
(:func:`share_sink`) colours its frames from the store (the colour statistics read the
store too, so a share needs nothing from the others) into the segment's MPEG-TS stream
beside the video, its timestamps starting where the segment starts
(:func:`farm.encode.segments.segment_output`); joined by stream copy, the streams are
one encoder's video. Every rank reads the store and writes beside the video, so both
must be on a file system the ranks share.

Who uses it: ``mpiexec -n N farm encode`` (farm/run/mpi_encode.py: every rank a share of a
finished store) and a render on several nodes (farm/run/mpi.py: each worker rank's share
made while the frames render, by a sink process that follows the store,
farm/encode/process.py).
"""

from __future__ import annotations

import os
import socket
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from farm.color import Style
from farm.encode.audio import silent_path
from farm.encode.ffmpeg import VideoSettings, choose_codec, even_size
from farm.encode.segments import boundaries, segment_output, segment_path
from farm.encode.sink import FrameSink
from farm.spec import Color
from farm.store.reader import Store

ROUNDS = 3  # segments a rank makes where what a frame costs is not known (dealt to and fro)


@dataclass(frozen=True)
class Shares:
    """What every rank needs to encode its share (rank 0 makes it, the others get a copy)."""

    store: str
    color: Color
    video: VideoSettings  # the (silent, where a soundtrack follows) video the segments make
    codec: str
    size: tuple[int, int]
    cuts: list[int]  # segment k: frames cuts[k] .. cuts[k + 1] - 1
    owners: list[int]  # segment k is encoded by the owners[k]-th of the ranks that encode

    @property
    def segments(self) -> int:
        return len(self.cuts) - 1

    def owned(self, r: int) -> list[int]:
        """The segments the r-th encoding rank makes, in order."""
        return [k for k, owner in enumerate(self.owners) if owner == r]


def cut(store: Store, store_path: str | os.PathLike[str], color: Color, video: VideoSettings,
        capacity: list[float], weights: np.ndarray | None, rounds: int = 1) -> Shares:
    """The shares of ``store``'s video for ranks of these capacities (one a rank that
    encodes, in order): ``rounds`` segments each, dealt to and fro (rank 0 the first, rank
    1 the second, ..., then the last rank first in the next round: :func:`dealt`), each
    segment's sum of ``weights`` (one a frame, or None: equal frames) in proportion to its
    rank's capacity. Where what a frame costs is not known (a render that has not begun),
    segments dealt in rounds give every rank frames from the whole film, its costly and
    its cheap parts. The video's settings and codec are fixed here, once, so that the
    segments join."""
    frames, size = store.frames, store.spec.size
    silent = replace(video, path=silent_path(video.path), audio=None) if video.audio else video
    owners = dealt(len(capacity), rounds)
    cuts = boundaries(frames, len(owners), video.fps, weights, [capacity[r] for r in owners])
    return Shares(str(store_path), color, silent, choose_codec(video.codec, *even_size(*size)), size,
                  cuts, owners[:len(cuts) - 1])


def dealt(ranks: int, rounds: int) -> list[int]:
    """Who encodes each segment: ``ranks`` ranks in order, then in reverse, and so on
    for ``rounds`` rounds. Where a frame's cost grows along the film (a zoom's deep end)
    and is not known, this evens the shares out: at 2 ranks and 3 rounds, costs 1..6
    give 1 + 4 + 5 and 2 + 3 + 6, where dealing in turn gives 9 and 12 (dealt in turn,
    the two shares of a 1500-frame expmap film on two emulated nodes took 45.4 and 57.2
    s, BENCHMARKS.md)."""
    return [r if j % 2 == 0 else ranks - 1 - r for j in range(rounds) for r in range(ranks)]


def frame_weights(store: Store) -> np.ndarray | None:
    """What each frame costs to colour and encode, about: its stored bytes (a frame of
    fine detail compresses less, and x264 takes longer over it; the deep end of a zoom
    is often twice the start). None where the store does not say (raw stores; an expmap
    store's tiles are strips, not frames; a store still rendering): then equal shares."""
    if store.expmap or "tiles/bytes" not in store.file:
        return None
    stored = np.asarray(store.file["tiles/bytes"][...], np.float64)
    return stored.reshape(stored.shape[0], -1).sum(axis=1)


def cores_here() -> tuple[str, frozenset[int]]:
    """This rank's node (FARM_NODE, else the host) and the cores it may use."""
    return (os.environ.get("FARM_NODE") or socket.gethostname(), frozenset(os.sched_getaffinity(0)))


def capacities(ranks: list[tuple[str, frozenset[int]]]) -> list[float]:
    """Each rank's share of its node's cores (``ranks``: :func:`cores_here` of each): a
    core counts 1/n for each of the n ranks of the node that may use it (a master and a
    worker on one node's cores get half each)."""
    users: dict[tuple[str, int], int] = {}
    for node, cores in ranks:
        for core in cores:
            users[node, core] = users.get((node, core), 0) + 1
    return [sum(1 / users[node, core] for core in cores) for node, cores in ranks]


def share_sink(shares: Shares, k: int, progress: bool = False) -> FrameSink:
    """The sink of segment ``k``: it colours and encodes frames cuts[k] .. cuts[k+1] - 1
    as they are told complete (every frame of their colouring windows too), into the
    segment's stream (:func:`farm.encode.segments.segment_path`)."""
    output = segment_output(shares.video, shares.codec, shares.size, shares.cuts, k)
    frames = range(shares.cuts[k], shares.cuts[k + 1])
    return FrameSink(shares.store, output, Style.from_settings(shares.color), shares.color.smoothing,
                     frames, progress=progress)


@dataclass(frozen=True)
class ShareReport:
    """What a rank says of its share once it has ended: None or why it failed (one line),
    the seconds it took, and for the run's timeline its colouring and writing seconds
    and the frames it wrote."""

    why: str | None
    seconds: float
    color_s: float = 0.0
    write_s: float = 0.0
    written: int = 0

    @classmethod
    def failed(cls, err: BaseException, seconds: float) -> ShareReport:
        lines = str(err).strip().splitlines() or traceback.format_exception_only(err)
        return cls(lines[0].strip(), seconds)


class ShareGroup:
    """The sinks of the segments the r-th encoding rank makes, with one sink's interface:
    ``frame_complete`` tells each; ``finish`` waits for all (the first segment's path);
    ``abort`` stops all and removes their streams, those already complete too. Their
    encoders run at once (several x264s of a few threads each use a node's cores better
    than one of many)."""

    def __init__(self, shares: Shares, r: int, progress: bool = False):
        self.paths = [segment_file(shares, k) for k in shares.owned(r)]
        self.sinks: list[FrameSink] = []
        try:
            for k in shares.owned(r):
                self.sinks.append(share_sink(shares, k, progress))
        except BaseException:
            self.abort()
            raise
        self.color_s = self.write_s = 0.0
        self.written = 0

    def frame_complete(self, f: int) -> None:
        for sink in self.sinks:
            sink.frame_complete(f)

    def finish(self) -> Path:
        try:
            paths = [sink.finish() for sink in self.sinks]
        except BaseException:
            self.abort()
            raise
        self.color_s = sum(s.color_s for s in self.sinks)
        self.write_s = sum(s.write_s for s in self.sinks)
        self.written = sum(s.written for s in self.sinks)
        return paths[0]

    def abort(self) -> None:
        for sink in self.sinks:
            sink.abort()
        for path in self.paths:
            path.unlink(missing_ok=True)


def segment_file(shares: Shares, k: int) -> Path:
    """Where segment k's stream is written."""
    return segment_path(Path(shares.video.path), k)
