"""The render's video sink in a process of its own.

During a render, colouring and encoding share nothing with the master but the store:
the sink reads every frame back through the store reader. In the master's process
its reading, colouring and piping to ffmpeg compete for the interpreter lock with the
master's receiving and writing and, in one process, with the workers (measured on
an H200: a light 1080p zoom's render phase took 3.7 s with the video against 1.7 s
without). So the render runs the same :class:`~farm.encode.sink.FrameSink` in a
child process: ``python -m farm.encode.process`` reads the job and the store's path
as its first line on stdin, then one frame number per line as frames complete, then
``finish`` or ``abort``; it answers on stdout with one JSON line (the video's path and
its timings, or the error). The child starts (imports, GPU context for colouring)
while the render runs.

A render on several nodes gives each worker rank such a child for its share of the video
(farm/encode/shares.py, :meth:`SinkProcess.follow_share`): its first line names the
share instead of the job, and the child, on another node than the master, learns which
frames are complete from the store itself (:class:`StoreFollower`: the done flags, read
past HDF5's caches) until ``finish``, which comes once the render has ended.

:class:`SinkProcess` is the parent's side, with the sink's interface: ``frame_complete``
(cheap, thread-safe, never raises), ``finish`` and ``abort``. The parent checks the
palette and the video path before it starts the child, so a bad one is still an error
before any work.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from farm.errors import FarmError

if TYPE_CHECKING:
    from farm.encode.shares import Shares

FOLLOW_EVERY = 0.25  # seconds between a share's looks at the store's done flags


class SinkProcess:
    """The parent's handle on a sink in a child process.

    The child is started first (``SinkProcess()``), as early as the render can: then
    the parent is small (forking a process that has a GPU driver's mappings took most
    of a second on an H200 host) and the child's imports overlap the render's start.
    :meth:`start` gives it the job once the store exists."""

    local = True  # it reads the store on the master's host

    def __init__(self) -> None:
        self.color_s = self.write_s = 0.0
        self.written = 0
        self._video: Path | None = None
        self._lock = threading.Lock()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "farm.encode.process"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, process_group=0)  # Ctrl-C is the parent's to handle

    def start(self, store_path: str | os.PathLike[str], spec_text: str,
              video: str | os.PathLike[str]) -> SinkProcess:
        """Colour the store's frames with the job's colours into ``video``."""
        self._video = Path(video)
        self._send(json.dumps({"store": str(store_path), "spec": spec_text, "video": str(video)}))
        return self

    def follow_share(self, shares: Shares, r: int) -> SinkProcess:
        """Colour and encode the segments of ``shares`` that the r-th encoding rank
        makes, as the store's frames complete."""
        self._send(json.dumps({"share": base64.b64encode(pickle.dumps((shares, r))).decode()}))
        return self

    def _send(self, line: str) -> None:
        stdin = self._proc.stdin
        assert stdin is not None
        with self._lock, contextlib.suppress(BrokenPipeError, OSError, ValueError):
            stdin.write(line + "\n")
            stdin.flush()

    def frame_complete(self, f: int) -> None:
        self._send(str(int(f)))

    def finish(self) -> Path:
        """Wait for the video; raises what went wrong in the child."""
        self._send("finish")
        answer = self._answer()
        if "error" in answer:
            raise FarmError(answer["error"])
        self.color_s, self.write_s = answer["color_s"], answer["write_s"]
        self.written = answer["written"]
        return Path(answer["path"])

    def abort(self) -> None:
        """Stop the child; nothing is left under the video's name. Idempotent."""
        if self._proc.poll() is None:
            self._send("abort")
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        from farm.encode.ffmpeg import partial_path

        if self._video is not None:
            with contextlib.suppress(OSError):  # if the child could not clean up (killed)
                partial_path(self._video).unlink()

    def _answer(self) -> dict[str, Any]:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        self._proc.wait()
        if self._proc.stdin:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        try:
            return dict(json.loads(line))
        except ValueError:
            return {"error": f"the video process ended with status {self._proc.returncode}"}


def _serve(stdin: IO[str], stdout: IO[str]) -> int:
    """The child: a FrameSink fed from ``stdin`` (see the module's docstring)."""
    from farm import spec as specmod
    from farm.encode import VideoSettings, open_video_sink

    first = stdin.readline()
    if not first.strip() or first.strip() == "abort":  # the render ended before it began
        return 0
    job = json.loads(first)
    follower = None
    sink: Any
    if "share" in job:
        from farm.encode.shares import ShareGroup

        shares, r = pickle.loads(base64.b64decode(job["share"]))  # from the parent, a farm
        sink = ShareGroup(shares, r)
        follower = StoreFollower(shares.store, sink.frame_complete)
    else:
        spec = specmod.parse_text(job["spec"])
        sink = open_video_sink(job["store"], spec.color, VideoSettings.from_spec(spec, job["video"]))
    try:
        return _feed(sink, stdin, stdout, follower)
    finally:
        if follower is not None:
            follower.stop()


def _feed(sink, stdin: IO[str], stdout: IO[str], follower: StoreFollower | None) -> int:
    for line in stdin:
        word = line.strip()
        if word == "finish":
            if follower is not None:
                follower.stop(look_again=True)  # the render has ended: every frame is there
            path = sink.finish()
            print(json.dumps({"path": str(path), "color_s": sink.color_s, "write_s": sink.write_s,
                              "written": sink.written}), file=stdout, flush=True)
            return 0
        if word == "abort":
            break
        sink.frame_complete(int(word))
    sink.abort()  # "abort", or the parent went away
    return 0


class StoreFollower:
    """Calls ``notify(f)`` once for each video frame of the store at ``store_path`` that
    its done flags say is complete (farm/store/reader.py's frame_done, read past HDF5's
    caches), looking every FOLLOW_EVERY seconds on a thread of its own until stopped."""

    def __init__(self, store_path: str, notify):
        from farm.store.reader import Store

        self._store = Store(store_path)
        self._notify = notify
        self._told: Any = None  # bool (frames,) told so far
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="store-follower", daemon=True)
        self._thread.start()

    def _look(self) -> None:
        import numpy as np

        done = self._store.frame_done()
        new = np.flatnonzero(done if self._told is None else done & ~self._told)
        self._told = done if self._told is None else self._told | done
        for f in new:
            self._notify(int(f))

    def _run(self) -> None:
        while True:
            self._look()
            if self._stopped.wait(FOLLOW_EVERY):
                return

    def stop(self, look_again: bool = False) -> None:
        """Stop looking (once more first, with ``look_again``); idempotent."""
        if not self._stopped.is_set():
            self._stopped.set()
            self._thread.join()
            if look_again:
                self._look()
            self._store.close()


def main() -> int:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    try:
        return _serve(sys.stdin, sys.stdout)
    except (FarmError, OSError, ValueError) as err:
        message = str(err) if isinstance(err, FarmError) else f"video: {err}"
        print(json.dumps({"error": message}), flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
