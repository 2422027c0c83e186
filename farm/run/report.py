"""Human-readable text for ``farm validate``, ``status``, ``devices`` and ``bench``."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from farm.plan import Plan
from farm.plan.reference_text import describe as describe_references
from farm.plan.reference_types import References
from farm.spec import spec_hash


def _spans(values: list[str]) -> str:
    """"f64 0-41, fp128 42-59" from a per-frame list."""
    out, k = [], 0
    for value, group in itertools.groupby(values):
        n = len(list(group))
        out.append(f"{value} {k}" if n == 1 else f"{value} {k}-{k + n - 1}")
        k += n
    return ", ".join(out)


def _count(n: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f}"


def _work_by_format(plan: Plan) -> dict[str, int]:
    """Iterations if every sample of every pixel ran to its frame's limit, per rate
    that ``farm bench`` measures: the frame's format, and "perturb-fx" for perturbed
    frames below double's range (floatexp deltas: kernels/perturb.cl, about 20x slower
    on PoCL)."""
    from farm.plan.precision import PERTURB_FX_BELOW_LOG10

    out: dict[str, int] = {}
    for u, f in enumerate(plan.frames):
        fmt = f.precision
        if fmt == "perturb" and f.log10_spacing < PERTURB_FX_BELOW_LOG10:
            fmt = "perturb-fx"
        out[fmt] = out.get(fmt, 0) + plan.unit_pixels(u) * plan.samples * f.max_iter
    return out


def _max_iter_lines(plan: Plan) -> list[str]:
    """The iteration limits: their range, and for ``max = "auto"`` the frames where a
    rule raised them above the depth rule (farm/plan/references.py
    with_period_limits), e.g. "above the depth rule by escape statistics: frames
    5-27 (up to 1655), 58-85 (up to 45116)"."""
    video = plan.video_frames
    limits = [f.max_iter for f in video]
    line = f"max iter   {min(limits)} .. {max(limits)}"
    if plan.spec.iterations.max != "auto":
        return [line + " (fixed)"]
    lines = [line + " (auto)"]
    for rule, name in (("escapes", "escape statistics"), ("periods", "nucleus periods")):
        runs = _runs([k for k, f in enumerate(video) if f.limit_rule == rule])
        if runs:
            shown = [(f"{a}-{b}" if b > a else f"{a}") + f" (up to {max(limits[a:b + 1])})"
                     for a, b in runs[:4]]
            more = f", ... {len(runs) - 4} more" if len(runs) > 4 else ""
            lines.append(f"           above the depth rule by {name}: frames {', '.join(shown)}{more}")
    return lines


def _runs(indices: list[int], gap: int = 3) -> list[tuple[int, int]]:
    """(first, last) of runs of ascending ``indices``, joined across gaps of fewer
    than ``gap`` frames."""
    runs: list[list[int]] = []
    for k in indices:
        if runs and k - runs[-1][1] <= gap:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    return [(a, b) for a, b in runs]


def _storage_lines(plan: Plan) -> list[str]:
    from farm.store import layout, space

    path = Path(plan.spec.output.store)
    codec = _codec(plan)
    size, free = layout.store_bytes(plan, codec), space.free(path) + space.allocated(path)
    fits = "" if size <= free else "  -- does not fit: `farm render` will refuse it"
    how = ""
    if codec.compressed:
        raw = layout.store_bytes(plan)
        how = f" (zstd, estimated: {space.human(raw)} uncompressed)"
    # complete, the store is compacted (farm/store/compact.py): ls -l, copies and du agree;
    # while it renders its slots make it longer (sparse: du counts what is written)
    length = layout.store_bytes(plan, codec, apparent=True)
    how += " on disk and in copies" + (f", {space.human(length)} long while it renders"
                                        if length > 1.1 * size else "")
    cap = space.largest_file(path)
    if cap is not None and length > cap[1]:
        fits = (f"  -- longer than the largest file of its file system ({cap[0]}: "
                f"{space.human(cap[1])}): `farm render` will refuse it")
    return [f"store      {plan.spec.output.store}",
            f"store size {space.human(size)} when complete{how} ({space.human(free)} free there){fits}"]


def _codec(plan: Plan):
    from farm.store.codec import Codec

    return Codec(plan.spec.output.compression, plan.spec.output.compression_level)


def _time_line(plan: Plan, device: str | None) -> str:
    """The kernels' time in the work's worst case, said as one: every sample of every
    pixel running to its frame's limit (:func:`_work_by_format`) at the rates ``farm
    bench`` measured, with what real renders made of it and what it leaves out.

    Not an estimate, and far from one where limits are long (the plan knows no frame's
    typical count: the escape pre-pass samples only some, in doubles, and none below
    1e-290 or where a nucleus sets the limit): real pixels stop when
    they escape, and perturbed frames skip iterations (deeper, more). Recorded on the
    2-core machine (PoCL, bench 0.54 Giter/s f64, 0.39 perturb, 0.04 perturb-fx):
    whole zooms took 0.14x-1.0x of it (tests/data/eta_*.npz: the dendrite to 1e-50
    0.17x, a `farm find` zoom to 1e-30 0.14x, first.toml to 1e-14 0.76x and, while the
    machine's load grew, 1.0x); stills far less: a Misiurewicz still at 1e-300
    (jobs/deep.toml's centre, 480x270) 0.06 s of a stated 110 s, a minibrot's at 1.5e-18
    (320x180) 0.54 s of 13.4 s; docs/stills/deep.toml (1e-10000, limit 10^7, 4
    samples) is stated 34.2 h. A single dense frame with a short limit can exceed it
    (up to 4.6x here: its iterations cost more than the bench's uniform ones, and the
    bench's rate moves with the machine's load). The time left of a render comes from
    the tiles' own cost instead (farm/store/estimate.py). Start-up, reference orbits,
    store writes and the video come on top; on a CPU device the writer and the video
    share the kernels' cores."""
    from farm.compute import rates

    if device is None:
        return "time       no OpenCL device here to estimate for"
    bound = rates.time_bound(_work_by_format(plan), device)
    if bound is None:
        return f"time       run `farm bench` once on {device} for a time estimate"
    samples = f" (x {plan.samples} samples)" if plan.samples > 1 else ""
    return (f"time       kernels {_duration(bound)} on {device} if every pixel{samples} ran to its limit "
            "at `farm bench`'s rate: the work's worst case, not an estimate\n"
            "           (pixels stop when they escape, perturbed frames skip iterations: zooms took "
            "0.14x-1x of it here, deep stills 1/25-1/1800; the progress bar and\n"
            "           `farm status` give the time left from the tiles' own cost); not counted: "
            "start-up, reference orbits, store writes, the video (on a CPU device they share its cores)")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


def _method_lines(plan: Plan) -> list[str]:
    """expmap: the units, the strip's sharpness, and pixels against the frames method."""
    layout = plan.layout
    if layout is None:
        return [f"pixels     {_count(plan.pixels)} in all"]
    g = layout.geom
    edges = ", ".join(f"{k} {v:.2f}" for k, v in g.edge_samples().items())
    return [
        f"method     expmap: strip of {g.angles} angles x {g.rows} rows ({g.segments} octave "
        f"segment(s) of {g.rows_per_octave} rows), centre image {g.centre_size[0]}x{g.centre_size[1]} "
        f"in {len(layout.pieces)} piece(s); {layout.count} units of {g.angles}x{g.rows_per_octave}",
        f"sharpness  strip samples per output pixel: {edges}; centre image "
        f"{g.centre_oversample} per pixel of the deepest frame",
        f"pixels     {_count(plan.pixels)} computed (expmap) against {_count(plan.frame_pixels)} "
        f"frame by frame: ratio {plan.pixels / plan.frame_pixels:.4f}",
    ]


def _width_line(plan: Plan) -> str:
    spec, video = plan.spec, plan.video_frames
    first, last = video[0], video[-1]
    if len(video) == 1:
        unused = "" if spec.view.width[0] == spec.view.width[1] else (
            f"; view.width[1] = {spec.view.width[1]} is not used: one frame")
        return f"width      {spec.view.width[0]} (pixel spacing 1e{first.log10_spacing:.1f}{unused})"
    return (f"width      {spec.view.width[0]} -> {spec.view.width[1]} "
            f"(pixel spacing 1e{first.log10_spacing:.1f} -> 1e{last.log10_spacing:.1f})")


def plan_summary(plan: Plan, source: str, device: str | None = None,
                 refs: References | None = None) -> str:
    spec = plan.spec
    w, h = spec.size
    video = plan.video_frames
    what = "frame" if plan.layout is None else "unit"
    lines = [
        f"job        {source} (spec {spec_hash(spec)})",
        f"frames     {len(video)} at {spec.animation.fps} fps "
        f"({len(video) / spec.animation.fps:.1f} s of video)",
        f"image      {w}x{h}; tiles {plan.grid.tile_w}x{plan.grid.tile_h}, "
        f"{plan.grid.count} per {what}, {plan.tasks} in all",
        f"center     {spec.view.center[0]}, {spec.view.center[1]}",
        _width_line(plan),
        *_max_iter_lines(plan),
        f"precision  {'' if plan.layout is None else 'units: '}"
        f"{_spans([f.precision for f in plan.frames])}",
        # perturbed frames: the reference points they iterate against (issue 14)
        *([] if refs is None else [f"reference  {line}" for line in describe_references(refs, plan)]),
        *_method_lines(plan),
        f"work       at most {_count(plan.work_bound())}iter "
        "(if every pixel ran to max iter; escaping pixels cost less)",
        _time_line(plan, device),
        *_storage_lines(plan),
        (f"video      {spec.output.video} (crf {spec.output.crf})" if len(video) > 1 else
         f"still      {Path(spec.output.video).with_suffix('.png')} (one frame: a PNG)"),
    ]
    return "\n".join(lines)


def plan_info(plan: Plan, source: str, device: str | None = None,
              refs: References | None = None) -> dict[str, Any]:
    """The plan as data, for ``farm validate --json`` and scripts (slurm/submit.sh)."""
    from farm.compute import rates
    from farm.store import layout

    spec = plan.spec
    info = {
        "job": source,
        "method": plan.method,
        "frames": len(plan.video_frames),
        "fps": spec.animation.fps,
        "size": list(spec.size),
        "tile": [plan.grid.tile_w, plan.grid.tile_h],
        "tiles_per_frame": plan.grid.count,  # expmap: per unit
        "width": list(spec.view.width),
        "max_iter": [f.max_iter for f in plan.video_frames],
        "precision": [f.precision for f in plan.frames],  # expmap: per unit
        "pixels": plan.pixels,  # computed by this method
        "frame_pixels": plan.frame_pixels,  # computed frame by frame (F W H)
        "pixel_ratio": plan.pixels / plan.frame_pixels,
        "work_bound_iterations": plan.work_bound(),
        "store": spec.output.store,
        "store_bytes": layout.store_bytes(plan, _codec(plan)),
        "store_bytes_raw": layout.store_bytes(plan),
        "device": device,
        "device_seconds_bound": rates.time_bound(_work_by_format(plan), device) if device else None,
        "video": spec.output.video,
        "references": [] if refs is None else [
            {"kind": r.kind, "period": r.period, "center": [r.point.re, r.point.im],
             "orbit_length": len(r.orbit),
             "frames": [i for i, k in enumerate(refs.frame_ref) if k == n]}
            for n, r in enumerate(refs.refs)],
    }
    if plan.layout is not None:
        g = plan.layout.geom
        info["expmap"] = {
            "units": plan.layout.count, "unit_max_iter": [f.max_iter for f in plan.frames],
            "angles": g.angles, "rows_per_octave": g.rows_per_octave, "rows": g.rows,
            "segments": g.segments, "centre_size": list(g.centre_size),
            "centre_pieces": len(plan.layout.pieces), "edge_samples": g.edge_samples()}
    return info


def _frame_strip(progress: list[float], width: int = 64) -> str:
    """One character per frame: '#' done, '+' started, '.' not started."""
    chars = "".join("#" if p >= 1 else "+" if p > 0 else "." for p in progress)
    return "\n".join(f"  {chars[i:i + width]}" for i in range(0, len(chars), width))


def _complete(count: int, progress: list[float]) -> int:
    """Frames (units) complete, counting only those whose tiles were all done when the
    tiles were read: a render that runs on writes ``frame_done`` after ``done``, and a
    frame counted complete beside tiles not yet done read as 48 frames of 47 tiles."""
    return min(count, sum(1 for p in progress if p >= 1))


def status_text(info: dict[str, Any]) -> str:
    done, total = info["tiles_done"], info["tiles_total"]
    expmap = info.get("method") == "expmap"
    lines = [
        f"store      {info['store']}",
        f"state      {'complete' if info['complete'] else 'incomplete'}",
    ]
    if expmap:
        lines += ["method     expmap: video frames are synthesised from rendered units",
                  f"units      {_complete(info['units_complete'], info['unit_progress'])}/"
                  f"{info['units']} complete",
                  f"frames     {info['frames_complete']}/{info['frames']} ready (all their units "
                  "complete)"]
    else:
        lines.append(f"frames     {_complete(info['frames_complete'], info['frame_progress'])}/"
                     f"{info['frames']} complete")
    lines.append(f"tiles      {done}/{total} ({100 * done / total:.1f}%), "
                 f"{info['tiles_per_frame']} per {'unit' if expmap else 'frame'}")
    holder = info.get("rendering")
    if holder is not None:
        from farm.store.lock import describe

        lines.append(f"rendering  {describe(holder)}")
    elif not info["complete"]:
        lines.append(f"rendering  nothing is rendering it; `farm resume {info['store']}` continues")
    run = info.get("run")
    if run:
        lines.append(f"run        #{run['index']} of {info['runs']}: {run['workers']} worker(s), "
                     f"{run['tiles']} tile(s)")
        if "tiles_per_s" in run:
            if info["complete"]:
                eta = "done"
            elif "eta_s" in run:
                share = f"{100 * run['work_done']:.1f}% of the work done, " if "work_done" in run else ""
                eta = f"{share}ETA {run['eta_s']:.0f} s (the predicted work at this run's pace)"
            else:
                eta = "stopped"
            lines.append(f"rate       {run['tiles_per_s']:.3g} tiles/s over {run['elapsed_s']:.1f} s; "
                         f"{eta}; last tile {max(0.0, run['last_tile_age_s']):.0f} s ago")
            busy = ", ".join(f"rank {r}: {b:.2f} s ({100 * run['busy_share'][r]:.0f}%)"
                             for r, b in run["busy_s"].items())
            lines.append(f"busy       {busy}")
            lines.append(f"balance    max/mean busy = {run['balance_max_over_mean']}")
        if "master_busy_share" in run:
            lines.extend(timeline_lines(run))
    if expmap:
        lines.append("per unit   (# done, + started, . waiting; in render order)")
        lines.append(_frame_strip(info["unit_progress"]))
    else:
        lines.append("per frame  (# done, + started, . waiting)")
        lines.append(_frame_strip(info["frame_progress"]))
    return "\n".join(lines)


def timeline_lines(run: dict[str, Any]) -> list[str]:
    """Where a run's wall time went (farm/runtime/timeline.py), from ``farm status``'s run."""
    t = run.get("timeline") or {}
    if not t.get("ended"):
        return ["timeline   (the run has not ended)"]
    begin = t["process_started"] or t["started"]
    render_end = t["render_ended"] or t["ended"]
    end = max(t["ended"], t["video_ended"])
    startup = max(0.0, t["started"] - begin - t["reference_s"])
    render = render_end - t["started"]
    phases = [f"start-up {startup:.2f} s", f"reference orbit {t['reference_s']:.2f} s",
              f"render {render:.2f} s"]
    if t["video_ended"]:
        phases.append(f"video after the last tile {t['video_ended'] - render_end:.2f} s")
    lines = [f"timeline   {end - begin:.2f} s in all: " + ", ".join(phases)]
    workers = max(1, t["workers"])
    share = 100 * t["gpu_s"] / (workers * render) if render > 0 else 0.0
    lines.append(
        f"  workers  ({workers}) device busy {t['gpu_s']:.2f} s ({share:.0f}% of {workers} x render), "
        f"waiting for frame preparation {t['prep_s']:.2f} s, kernel builds {t['build_s']:.2f} s, "
        f"device set-up {t['setup_s']:.2f} s, sending {t['send_s']:.2f} s, idle {t['idle_s']:.2f} s")
    master = (f"  master   loop {t['master_busy']:.2f} s (receiving {t['master_receive']:.2f} s), "
              f"writer thread {t['writer_busy']:.2f} s")
    if t["video_frames"]:
        master += (f"; video {t['video_frames']} frames: colouring {t['color_s']:.2f} s, "
                   f"encoding {t['encode_s']:.2f} s")
    lines.append(master)
    return lines


def devices_text(selector: str | None) -> tuple[str, Any]:
    """``farm devices``: every device (those that cannot render with why), the
    candidates for the selector (``--device``, else FARM_DEVICE) and what is missing;
    and the selector's error (a FarmError: the command's exit status) or None. A
    selector that is not one says only that."""
    from farm.compute.device import (
        candidates,
        check_selector,
        compiler_hint,
        known_problem,
        list_devices,
        selector_from_env,
        unregistered_driver,
    )
    from farm.errors import FarmError
    from farm.schedule import transport

    sel = selector_from_env(selector)
    try:
        check_selector(sel)
    except FarmError as err:
        return "", err
    comm = transport.mpi_world()
    devs = list_devices()
    lines = [] if devs else ["no OpenCL platform found"]
    error: FarmError | None = None
    try:
        chosen = [d[0] for d in candidates(sel)]
    except FarmError as err:
        chosen, error = [], err
    broken = []
    for info, _ in devs:
        mark = "*" if info in chosen else " "
        problem = known_problem(info)  # checked: the candidates and the devices before them
        if problem:
            broken.append(info)
        lines.append(f"{mark} {info.describe()}" + (f"\n      cannot render: {problem}" if problem else ""))
    if chosen:
        gpus = [i.ref for i in chosen if i.kind == "GPU"]
        local = f"every GPU ({', '.join(gpus)})" if gpus else chosen[0].ref
        lines.append(f"* = candidates for {sel.origin} {sel}; one process uses {local}, "
                     f"MPI worker k of a node uses candidate k")
    if broken:
        lines.append("a device that cannot render is never used"
                     + ("" if chosen else "; " + compiler_hint(broken, [i for i, _ in devs])))
    if not any(i.kind == "GPU" for i, _ in devs):
        lines.append("no GPU: " + (unregistered_driver() or (
            "renders run on the CPU device above; " if chosen else "") + "for a GPU install its "
            "vendor's OpenCL driver"))
    if comm is not None:
        lines = _mpi_bindings(comm, sel) + ([""] + lines if comm.Get_rank() == 0 else [])
        return ("\n".join(lines) if comm.Get_rank() == 0 else ""), error
    return "\n".join(lines), error


def _mpi_bindings(comm, selector: str) -> list[str]:
    """Gathered on rank 0: the device each worker rank would bind to, per host."""
    from farm.compute.device import bind_device
    from farm.errors import FarmError
    from farm.schedule import transport

    index, _, host = transport.node_worker_index(comm)
    rank = comm.Get_rank()
    if rank == 0:
        mine = f"rank {rank} on {host}: master (no device)"
    else:
        try:
            info, _ = bind_device(selector, index, share=True)
            shared = ""
            try:
                bind_device(selector, index, share=False)
            except FarmError:
                shared = " (shared: needs --share-devices)"
            mine = f"rank {rank} on {host}: worker {index} of its node -> {info.describe()}{shared}"
        except FarmError as err:
            mine = f"rank {rank} on {host}: worker {index}: {err}"
    rows = comm.gather(mine, root=0)
    return rows if rank == 0 else []


def bench_table(rows: list) -> str:
    head = f"{'device':<34} {'format':<12} {'workload':<22} {'seconds':>9} {'Giter/s':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        work = f"{r.pixels}px x {r.iterations}"
        lines.append(f"{r.device[:34]:<34} {r.format:<12} {work:<22} {r.seconds:9.4f} {r.giters:9.2f}")
    return "\n".join(lines)
