"""Time stamps of a render's video, in every Python process of the command (loaded
through PYTHONPATH by benchmarks/video_trace.py; does nothing unless FARM_TRACE is set).

Each process writes ``$FARM_TRACE.<pid>.json`` at exit: its start (unix time), when each
frame was announced to a sink, each encoder's start, first and last frame written, close
and end (``enc``), when each frame's colouring began and ended, when the colourer was
made, and the segments' join (when each segment was handed to it, and its end).
Wrapping, not changing: the farm's functions are replaced by ones that stamp the time
and call them."""

import atexit
import json
import os
import sys
import threading
import time

if os.environ.get("FARM_TRACE"):
    T: dict = {"pid": os.getpid(), "argv": sys.argv[:3], "start": time.time(), "enc": {}, "complete": {},
               "frames": {}}
    _lock = threading.Lock()

    def _dump() -> None:
        with open(f"{os.environ['FARM_TRACE']}.{os.getpid()}.json", "w") as fh:
            json.dump(T, fh)

    atexit.register(_dump)

    def _around(owner, name: str, key: str) -> None:
        inner = getattr(owner, name)

        def wrapped(*args, **kwargs):
            T[key + "_begin"] = time.time()
            try:
                return inner(*args, **kwargs)
            finally:
                T[key + "_end"] = time.time()
        setattr(owner, name, wrapped)

    try:
        import farm.encode as encode
        import farm.encode.ffmpeg as ffmpeg
        import farm.encode.process as process
        import farm.encode.segments as segments
        import farm.encode.sink as sink

        def _encoder(enc, what: str) -> None:
            with _lock:
                d = T["enc"].setdefault(enc.path.name, {})
                now = time.time()
                if what == "write":
                    d.setdefault("first", now)
                    d["last"], d["n"] = now, d.get("n", 0) + 1
                else:
                    d[what] = now

        Encoder = ffmpeg.VideoEncoder
        _init, _write, _close = Encoder.__init__, Encoder.write, Encoder.close

        def init(self, *args, **kwargs):
            t0 = time.time()
            _init(self, *args, **kwargs)
            _encoder(self, "started")
            T["enc"][self.path.name]["init"] = t0

        def write(self, rgb):
            _write(self, rgb)
            _encoder(self, "write")

        def close(self):
            _encoder(self, "close")
            path = _close(self)
            _encoder(self, "done")
            return path

        Encoder.__init__, Encoder.write, Encoder.close = init, write, close
        _complete, _frame = sink.FrameSink.frame_complete, sink.FrameSink._frame

        def frame_complete(self, f):
            with _lock:
                T["complete"].setdefault(str(f), time.time())
            _complete(self, f)

        def frame(self, f):
            t0 = time.time()
            rgb = _frame(self, f)
            with _lock:
                T["frames"][str(f)] = (t0, time.time())
            return rgb

        sink.FrameSink.frame_complete, sink.FrameSink._frame = frame_complete, frame
        _around(sink, "default_colourer", "colourer")
        _around(segments.Joiner, "finish", "join_finish")  # from the last segment's end
        _segment_done = segments.Joiner.segment_done

        def segment_done(self, k):
            T.setdefault("segment_done", {})[str(k)] = time.time()
            _segment_done(self, k)

        segments.Joiner.segment_done = segment_done
        _around(encode, "open_video_sink", "open_sink")
        _around(process.SinkProcess, "finish", "sink_process_finish")
    except Exception as err:  # a farm without one of these: say so in the trace
        T["error"] = repr(err)
