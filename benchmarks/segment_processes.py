#!/usr/bin/env python3
"""`farm encode`'s segments, each in a process of its own (an experiment, not the farm's
way: farm/encode/segments.py runs every segment's sink in one process).

    python3 benchmarks/segment_processes.py STORE K OUT.mp4

Starts K processes at once; process k colours and encodes segment k's frames (the
boundaries and encoder of farm/encode/segments.py; frame threads of its own, max(2, 8 //
K), as each segment had before they shared one pool) into the segment's stream; then the
segments are joined as the farm joins them. Prints the seconds of the segments and of
the join. Were the segments slow for sharing one interpreter's lock, this would be
faster than FARM_ENCODE_SEGMENTS=K farm encode."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def segment(store: str, count: int, out: Path, k: int) -> None:
    from farm.encode import _checked_style
    from farm.encode import segments as sg
    from farm.encode.ffmpeg import VideoSettings, choose_codec
    from farm.encode.sink import FrameSink
    from farm.store.reader import Store

    with Store(store) as s:
        spec, frames = s.spec, s.frames
    settings = VideoSettings.from_spec(spec, str(out))
    cuts = sg.boundaries(frames, count, settings.fps)
    w, h = spec.size
    output = sg.segment_output(settings, choose_codec(settings.codec, w - w % 2, h - h % 2), (w, h), cuts, k)
    sink = FrameSink(store, output, _checked_style(spec.color, out, frames), spec.color.smoothing,
                     range(cuts[k], cuts[k + 1]), threads=max(2, 8 // (len(cuts) - 1)))
    for f in range(frames):
        sink.frame_complete(f)
    sink.finish()


def main() -> None:
    if len(sys.argv) not in (4, 5):
        raise SystemExit(__doc__)
    store, count, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    if len(sys.argv) == 5:
        segment(store, count, out, int(sys.argv[4]))
        return
    from farm.encode import segments as sg
    from farm.encode.ffmpeg import VideoSettings
    from farm.store.reader import Store

    with Store(store) as s:
        fps = VideoSettings.from_spec(s.spec, str(out)).fps
        parts = len(sg.boundaries(s.frames, count, fps)) - 1
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, __file__, store, str(count), str(out), str(k)])
             for k in range(parts)]
    if any(p.wait() != 0 for p in procs):
        raise SystemExit("a segment failed")
    t1 = time.perf_counter()
    sg.join([sg.segment_path(out, k) for k in range(parts)], out, fps)
    t2 = time.perf_counter()
    print(f"{parts} processes: segments {t1 - t0:.2f} s, join {t2 - t1:.2f} s, total {t2 - t0:.2f} s "
          f"(CPU s of the children: {sum(os.times()[2:4]):.1f})")


if __name__ == "__main__":
    main()
