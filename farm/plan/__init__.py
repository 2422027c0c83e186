"""From a job spec to a plan: frames, tiles, iteration limits and number formats.

The plan is a pure function of the spec; the master computes it once and hands it
to every worker, so all ranks agree on every number.

``Plan.frames`` are what the farm renders, tile by tile, and what the store's first
axis holds. With ``[animation] method = "frames"`` they are the video frames. With
``"expmap"`` they are render *units* (strip segments and centre-image pieces of an
exponential map, :mod:`farm.plan.units`), each with its iteration limit, format and
precision like a frame; ``Plan.video_frames`` are then the video frames, synthesised
from the units (:mod:`farm.synth`), and ``Plan.layout`` says what every unit's tiles
compute and which units each video frame reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from farm.errors import SpecError
from farm.plan import precision
from farm.plan.channels import Channel, channels_for
from farm.plan.reference_types import References
from farm.plan.references import select as select_references
from farm.plan.tiles import Tile, TileGrid
from farm.plan.units import ExpmapLayout
from farm.spec import JobSpec, auto_tile_side, canonical_text, parse_text

__all__ = ["Channel", "ExpmapLayout", "FramePlan", "Plan", "Tile", "TileGrid", "auto_max_iter",
           "make_plan"]


def auto_max_iter(log10_zoom: float) -> int:
    """``max = "auto"``: ``256 + 64 * d**1.5`` where ``d = log10(4 / width)`` (0 if negative),
    at most the spec's limit of 10^7.

    Deeper frames need more iterations before their detail escapes; the rule gives
    256 at the whole set, ~6200 at width 1e-20, ~330000 at 1e-300.
    """
    from farm.spec import MAX_ITER_LIMIT

    d = max(0.0, log10_zoom)
    return min(MAX_ITER_LIMIT, int(round(256 + 64 * d**1.5)))


@dataclass(frozen=True)
class FramePlan:
    index: int
    width: Any  # mpmath mpf, complex-plane units across the image
    spacing: Any  # mpmath mpf, width / W
    log10_spacing: float
    max_iter: int
    precision: str  # f64 | fp128 | quad-single | perturb
    bits: int  # mpmath precision for this frame's coordinates
    # max = "auto": the rule that set max_iter ("depth", "periods" or "escapes": see
    # farm/plan/auto_limits.py with_period_limits); "" for a fixed or stored limit
    limit_rule: str = field(default="", compare=False)
    # degrees, counter-clockwise, exact (farm/plan/curve.py): the frame's rotation; 0 for
    # expmap units (their strip and centre image are unrotated: synthesis turns them)
    angle: Fraction = Fraction(0)

    @property
    def rotated(self) -> bool:
        """Whether the frame is turned (its angle is not a whole number of turns)."""
        return self.angle % 360 != 0

    @property
    def bins(self) -> int:
        """Histogram length: counts 0 (interior) .. max_iter."""
        return self.max_iter + 1


@dataclass(frozen=True)
class Plan:
    spec: JobSpec
    frames: tuple[FramePlan, ...]  # what is rendered: video frames, or expmap units
    grid: TileGrid  # tiles of one frame (or unit)
    video: tuple[FramePlan, ...] = ()  # expmap: the video frames (synthesised)
    layout: ExpmapLayout | None = None  # expmap: units, their tiles, what each frame reads

    @property
    def method(self) -> str:
        return self.spec.animation.method

    @property
    def video_frames(self) -> tuple[FramePlan, ...]:
        """The frames of the video (their widths, spacings and iteration limits)."""
        return self.video if self.layout is not None else self.frames

    def frames_ready(self, done: Any) -> Any:
        """Video frames (int64 indices, ascending) whose data is complete, given ``done``
        bool (len(frames),): which rendered frames (or expmap units) are complete, as
        the store's ``frame_done``. For the frames method they are the same frames."""
        import numpy as np

        if self.layout is None:
            return np.flatnonzero(np.asarray(done, dtype=bool))
        return self.layout.frames_ready(done)

    def frame_notifier(self, done: Any, notify: Callable[[int], None]) -> Callable[[int], None]:
        """The master's callback for completed frames (or expmap units): it calls
        ``notify(f)`` for each video frame that becomes ready. ``done``: what was
        complete before (frames_ready(done) are taken as told). Frames method: notify."""
        if self.layout is None:
            return notify
        from farm.plan.units import ReadyFrames

        return ReadyFrames(self.layout, done, notify)

    def unit_pixels(self, u: int) -> int:
        """Pixels that rendering frame (or unit) u computes."""
        if self.layout is None:
            return self.grid.width * self.grid.height
        return self.layout.unit_pixels(u)

    @property
    def pixels(self) -> int:
        """Pixels the whole render computes."""
        if self.layout is None:
            return len(self.frames) * self.grid.width * self.grid.height
        return sum(self.unit_pixels(u) for u in range(len(self.frames)))

    @property
    def frame_pixels(self) -> int:
        """Pixels the frames method computes for the same zoom (F W H)."""
        w, h = self.spec.size
        return len(self.video_frames) * w * h

    @property
    def s_min(self) -> Any:
        """The deepest video frame's pixel spacing (mpmath mpf): the unit of the
        exponential map's radii."""
        return min(self.video_frames, key=lambda f: f.width).spacing

    @property
    def bins(self) -> int:
        """Histogram row length in the store: the largest frame's ``max_iter + 1``."""
        return max(f.bins for f in self.frames)

    @property
    def channels(self) -> tuple[Channel, ...]:
        """The per-pixel channels every tile carries, in kernel-argument and message
        order (farm.plan.channels): iterations and fraction, then the distance estimate
        and the extra samples when the spec asks for them."""
        return channels_for(self.spec.image.samples, self.spec.render.distance)

    @property
    def samples(self) -> int:
        """Samples per pixel (farm/plan/samples.py); sample 0 is the pixel centre."""
        return self.spec.image.samples

    @property
    def perturbed(self) -> list[FramePlan]:
        return [f for f in self.frames if f.precision == "perturb"]

    def reference_needs(self) -> tuple[int, int] | None:
        """(bits, iterations) that the references of the perturbed frames need at most:
        the deepest frame's coordinate precision and the largest iteration limit, or
        None when no frame is perturbed."""
        frames = self.perturbed
        if not frames:
            return None
        return max(f.bits for f in frames), max(f.max_iter for f in frames)

    def references(self, progress: Callable[[str], None] | None = None) -> References | None:
        """The reference points and orbits of the perturbed frames, chosen as
        farm/plan/references.py describes (None when no frame is perturbed)."""
        return select_references(self, progress)

    @property
    def tasks(self) -> int:
        return len(self.frames) * self.grid.count

    def work_bound(self) -> int:
        """Iterations if every sample of every pixel ran to its frame's max_iter (an upper
        bound)."""
        return sum(self.unit_pixels(u) * self.samples * f.max_iter for u, f in enumerate(self.frames))

    def __reduce__(self):
        """Pickle as what the plan is a function of: the spec and each frame's choices.

        mpmath numbers do not survive pickling (unpickling rounds them to the receiving
        process's working precision, 53 bits), so MPI workers rebuild the frames."""
        stored = [(f.max_iter, f.precision) for f in self.frames]
        video = [f.max_iter for f in self.video] if self.layout is not None else None
        return (_rebuild, (canonical_text(self.spec), stored, video))


def _rebuild(spec_text: str, stored: list[tuple[int, str]], video: list[int] | None = None) -> Plan:
    return make_plan(parse_text(spec_text), stored=stored, stored_video=video)


def _frame_precision(requested: str, k: int, log10_s: float) -> str:
    if requested == "auto":
        chosen = precision.choose(log10_s)
        if chosen is None:
            fmt, limit = precision.deepest()
            raise SpecError(
                "view.width",
                f"frame {k} has pixel spacing 1e{log10_s:.1f}, beyond every format "
                f"(the deepest, {fmt}, resolves down to 1e{limit:.1f})",
            )
        return chosen
    if not precision.resolves(requested, log10_s):
        raise SpecError(
            "render.precision",
            f"{requested} cannot resolve frame {k}: pixel spacing 1e{log10_s:.1f} is below its "
            f"limit 1e{precision.min_log10_spacing(requested):.1f}; use \"auto\" or a wider view.width",
        )
    return requested


def make_plan(spec: JobSpec, stored: Sequence[tuple[int, str]] | None = None,
              stored_video: Sequence[int] | None = None) -> Plan:
    """Frames with their widths and angles (farm/plan/curve.py), iteration limits and formats (and,
    for the expmap method, the units that render them: :mod:`farm.plan.units`).

    ``stored`` gives (max_iter, precision) per rendered frame (or unit) as a store
    recorded them, ``stored_video`` the expmap video frames' max_iter; they are kept
    as they are, so a store resumes with the choices it was started with.
    """
    if spec.animation.method == "expmap":
        from farm.plan.units import expmap_plan

        return expmap_plan(spec, _frames(spec, None, stored_video), stored)
    frames = _frames(spec, stored, None)
    w_px, h_px = spec.size
    tile = spec.render.tile
    grid = (TileGrid.auto(w_px, h_px, auto_tile_side(spec.image.samples)) if tile == "auto"
            else TileGrid.fitted(w_px, h_px, *tile))
    return Plan(spec, tuple(frames), grid)


def _frames(spec: JobSpec, stored: Sequence[tuple[int, str]] | None,
            stored_max_iter: Sequence[int] | None) -> list[FramePlan]:
    """The video frames: widths, spacings, iteration limits and (direct-render) formats."""
    import farm.numerics as num  # here, not above: reading a store needs no mpmath
    from farm.plan.curve import frame_angles, frame_widths

    w_px = spec.size[0]
    frames = []
    angles = frame_angles(spec)
    for k, width in enumerate(frame_widths(spec)):
        with num.workprec(num.WIDTH_BITS):
            spacing = width / w_px
        log10_s = num.log10(spacing)
        rule = ""
        if stored is not None:
            max_iter, fmt = stored[k]
        else:
            if stored_max_iter is not None:
                max_iter = int(stored_max_iter[k])
            elif spec.iterations.max == "auto":
                max_iter, rule = auto_max_iter(num.log10(4 / width)), "depth"
            else:
                max_iter = int(spec.iterations.max)
            fmt = _frame_precision(spec.render.precision, k, log10_s)
        frames.append(FramePlan(k, width, spacing, log10_s, max_iter, fmt,
                                num.coordinate_bits(spacing), rule, angles[k]))
    return frames
