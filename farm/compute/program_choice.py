"""Which OpenCL program renders a frame, and with which build options: the kernel
family of its format (f64, fp128, quad-single, perturbation with double or floatexp
deltas, the CPU's lanes kernel), the plan's channels (-DSAMPLES, -DDISTANCE), the
frame's own (a polar tile, a turned frame) and the launch configuration's
(farm/compute/launch.py). Chosen from the plan, the device and the configuration
alone, so that a new render builds its first programs (:func:`build_ahead`) before
its renderer exists.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyopencl as cl

from farm.compute import clstart, programs
from farm.compute.histogram import long_rows
from farm.compute.inventory import DeviceInfo
from farm.compute.launch import LaunchConfig
from farm.plan import FramePlan, Plan, precision
from farm.plan.units import CENTRE


def channel_options(plan: Plan) -> tuple[str, ...]:
    """Build options for the plan's channels: -DSAMPLES=N (N > 1), -DDISTANCE."""
    opts: tuple[str, ...] = ()
    if plan.samples > 1:
        opts += (f"-DSAMPLES={plan.samples}",)
    if plan.spec.render.distance:
        opts += ("-DDISTANCE",)
    return opts


@dataclass(frozen=True)
class ProgramChoice:
    """The OpenCL programs a tile renderer of ``plan`` (farm/compute/render.py) builds,
    chosen from the plan, the device's build options and the launch configuration
    alone: a new render builds its first ones (:func:`build_ahead`) while its
    references are computed."""

    plan: Plan
    config: LaunchConfig
    options: tuple[str, ...]  # every program's: the device's, the channels', pixel blocks
    interior: bool
    count_steps: bool = False

    @classmethod
    def choose(cls, device: cl.Device, plan: Plan, config: LaunchConfig, interior: bool | None = None,
               count_steps: bool = False) -> ProgramChoice:
        options = programs.device_options(device, config.local_bins) + channel_options(plan)
        if config.pixel_blocks:
            options += ("-DPIXEL_BLOCKS",)
        return cls(plan, config, options, config.interior if interior is None else interior, count_steps)

    def polar(self, frame: FramePlan) -> bool:
        """Whether ``frame`` is an expmap strip segment (polar tiles)."""
        layout = self.plan.layout
        return layout is not None and layout.units[frame.index].kind != CENTRE

    def lanes(self, frame: FramePlan) -> int:
        """Pixels in flight per work-item for this frame (1: one at a time)."""
        if (frame.precision != "perturb" or self.count_steps
                or frame.log10_spacing < precision.PERTURB_FX_BELOW_LOG10):
            return 1
        return max(1, self.config.lanes)

    def kernel(self, frame: FramePlan) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        """(key, sources, options) of the program whose ``mandel`` renders ``frame``;
        frames of one key share it."""
        fmt = frame.precision
        sources: tuple[str, ...] = (programs.FORMAT_SOURCES[fmt], "histogram.cl", "mandel.cl")
        extra: tuple[str, ...] = ()
        if fmt == "perturb" and frame.log10_spacing < precision.PERTURB_FX_BELOW_LOG10:
            extra = ("-DPERTURB_FX",)
        if self.polar(frame):
            extra += ("-DPOLAR",)
        if frame.rotated:
            extra += ("-DROTATED",)
        if fmt == "perturb" and self.count_steps:
            extra += ("-DPERTURB_STEPS",)
        if fmt == "perturb" and not self.interior:
            extra += ("-DPERTURB_NO_INTERIOR",)
        if self.lanes(frame) > 1:
            sources = ("perturb.cl", "perturb_lanes.cl", "histogram.cl", "mandel.cl")
            extra += (f"-DPERTURB_LANES={self.lanes(frame)}",)
        if fmt == "perturb" and self.config.min_skip_level != 1:
            extra += (f"-DBLA_MIN_LEVEL={self.config.min_skip_level}",)
        return fmt + "".join(extra), sources, self.options + extra

    def hist_top(self) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """(sources, options) of the program that finds a tile's highest count, for
        histogram rows longer than HIST_STAGED; None otherwise."""
        return (("hist_top.cl",), self.options) if long_rows(self.plan.bins) else None


def build_ahead(device: cl.Device, info: DeviceInfo, plan: Plan, shuffle: bool) -> list[cl.Program]:
    """Build the programs a new render's tile renderer on ``device`` needs before its
    first kernel (the first frame's kernel, the highest count's, the shuffle's), on the
    context made for it beside the start (:func:`farm.compute.clstart.prepare_contexts`),
    which the renderer then takes: its own builds find them
    (:func:`farm.compute.programs.build` keeps a program while something holds it: hold
    the list returned until the renderer exists). Nothing where no such context waits.
    Called while the references are computed in a process of their own
    (farm/run/early_refs.py), it takes the builds off the way to the first kernel (60-90
    ms of it; BENCHMARKS.md, sixteenth session)."""
    clstart.wait_contexts()
    handle = clstart.made_for(device)
    if handle is None or not plan.frames:
        return []
    ctx = cl.Context.from_int_ptr(handle, retain=True)
    choice = ProgramChoice.choose(device, plan, LaunchConfig.for_device(info))
    first = choice.kernel(plan.frames[0])
    wanted = [first[1:], choice.hist_top(), (("shuffle.cl",), ()) if shuffle else None]
    return [programs.build(ctx, *w) for w in wanted if w is not None]
