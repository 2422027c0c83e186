"""Each frame's width and angle: a constant zoom (and turning) speed, or timing curves
through waypoints.

Without keys (DESIGN.md's contract): frame ``k`` of ``F`` has width
``w0 (w1/w0)^(k/(F-1))``; ``F = 1`` renders ``w0``.

With ``[[animation.keys]]`` (farm/spec/keys.py), frame ``k`` shows time ``t = k / fps``
seconds, and its width is ``exp(y(t))``, ``y`` a curve through the keys' points
``(t_i, y_i = ln w_i)``:

* before the first key ``y = y_0``, after the last ``y = y_n`` (the view holds);
* from key ``i`` to key ``i+1`` by key ``i``'s ``interpolation``:
  ``"hold"``: ``y = y_i`` for ``t < t_{i+1}`` (a cut to the next key at ``t_{i+1}``);
  ``"linear"``: ``y`` linear in ``t`` (a constant zoom speed);
  ``"cubic"``: the cubic Hermite segment with end slopes ``m_i``, ``m_{i+1}``
  (``s = (t - t_i) / h``, ``h = t_{i+1} - t_i``):
  ``y = (2s^3 - 3s^2 + 1) y_i + (s^3 - 2s^2 + s) h m_i + (-2s^3 + 3s^2) y_{i+1} + (s^3 - s^2) h m_{i+1}``;
* slopes (``d_i = (y_{i+1} - y_i) / h_i``, the segment's mean slope):
  0 at the first and last key (the film starts and ends at rest) and at a key
  beside a hold; between two cubic segments Steffen's monotone slope
  ``m_i = (sign d_{i-1} + sign d_i) min(|d_{i-1}|, |d_i|, |p_i| / 2)``,
  ``p_i = (d_{i-1} h_i + d_i h_{i-1}) / (h_{i-1} + h_i)``; beside a linear segment
  the linear slope, limited to ``[0, 3 d]`` of the cubic neighbour (0 when they
  differ in sign), so the speed does not jump where it need not.

Every slope has the sign of its segments' ``d`` and at most 3 times its size, so each
cubic segment is monotone in ``t``: the zoom never overshoots a key (two keys of
equal width give a still hold, every frame between them at exactly that width; a key
between a zoom in and a zoom out is the turning point).

Numbers: times are exact rationals (the decimal a key's time was written as, and
``k / fps``); logs, slopes and widths are mpmath at ``WIDTH_BITS``, from the keys'
decimal strings; a frame exactly at a key's time gets the key's width exactly. The
same spec gives the same widths on every machine and rank.

Angles (farm/spec/keys.py, degrees counter-clockwise): keys that carry ``angle`` give
frame ``k`` the angle ``a(t)``, the same curve through the points ``(t_i, a_i)`` in
plain degrees (not logs): the same segments, interpolations and slope rules, so an
angle never overshoots a key either, and two keys of equal angle hold it. Without
angled keys, ``a = view.angle + animation.turn * t``. Angles are exact rationals (the
keys' numbers read as the decimals they were written as, times ``k / fps``, and the
Hermite polynomial in exact arithmetic), so a frame's rotation is the same on every
rank; rounding happens once, where cos and sin of the angle are taken
(:func:`farm.numerics.rotation`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import farm.numerics as num

if TYPE_CHECKING:
    import mpmath

    from farm.spec import JobSpec
    from farm.spec.keys import Key


def _mpf(x: Fraction) -> mpmath.mpf:
    return num.mpf(x.numerator) / x.denominator


def _key_width(key: Key) -> mpmath.mpf:
    if key.width is not None:
        return num.mpf(key.width)
    return 4 / num.mpf(key.zoom)


def _limited(m, d):
    """Slope ``m`` for a cubic segment of mean slope ``d``: 0 against its sign, at most 3 d."""
    if m * d <= 0:
        return 0 * d
    return min(abs(m), 3 * abs(d)) * (1 if d > 0 else -1)


def _steffen(d0, d1, h0, h1):
    if d0 * d1 <= 0:
        return 0 * d0
    p = (d0 * h1 + d1 * h0) / (h0 + h1)
    sign = 1 if d0 > 0 else -1
    return 2 * sign * min(abs(d0), abs(d1), abs(p) / 2)


class Segments:
    """A value ``y`` against time through points ``(t_i, y_i)`` (times exact rationals,
    increasing), segment ``i`` interpolated by ``hows[i]`` (the module's docstring).

    The arithmetic is that of the values: mpmath numbers (log widths: the caller sets
    the working precision) or exact Fractions (angles); ``lift`` turns an exact time
    difference into such a number."""

    def __init__(self, times: Sequence[Fraction], values: Sequence, hows: Sequence[str],
                 lift: Callable[[Fraction], Any]):
        self.t, self.y, self.hows, self.lift = list(times), list(values), list(hows), lift
        self.h = [lift(b - a) for a, b in zip(self.t, self.t[1:], strict=False)]
        self.d = [(self.y[i + 1] - self.y[i]) / self.h[i] for i in range(len(self.h))]
        self.m = [self._slope(i) for i in range(len(self.t))]

    def _slope(self, i: int):
        zero = 0 * self.y[0]
        if i == 0 or i == len(self.t) - 1:
            return zero
        left, right = self.hows[i - 1], self.hows[i]
        if "hold" in (left, right):
            return zero
        dl, dr = self.d[i - 1], self.d[i]
        if left == "linear":
            return _limited(dl, dr) if right == "cubic" else dl
        if right == "linear":
            return _limited(dr, dl)
        return _steffen(dl, dr, self.h[i - 1], self.h[i])

    def segment(self, t: Fraction) -> int | None:
        """The segment whose inside holds ``t`` (None: at or outside a key's time)."""
        if t <= self.t[0] or t >= self.t[-1]:
            return None
        i = bisect.bisect_right(self.t, t) - 1
        return None if t == self.t[i] else i

    def value(self, t: Fraction):
        """y at time ``t`` (an exact rational): a key's value at its time and outside
        the keys, the segment's interpolation inside one."""
        i = self.segment(t)
        if i is None:
            k = 0 if t <= self.t[0] else len(self.t) - 1 if t >= self.t[-1] else self.t.index(t)
            return self.y[k]
        y0, y1 = self.y[i], self.y[i + 1]
        how = self.hows[i]
        if how == "hold" or y0 == y1:  # a still (both slopes are 0)
            return y0
        s = self.lift((t - self.t[i]) / (self.t[i + 1] - self.t[i]))
        if how == "linear":
            return y0 + s * (y1 - y0)
        h, m0, m1 = self.h[i], self.m[i], self.m[i + 1]
        s2, s3 = s * s, s * s * s
        return ((2 * s3 - 3 * s2 + 1) * y0 + (s3 - 2 * s2 + s) * h * m0
                + (3 * s2 - 2 * s3) * y1 + (s3 - s2) * h * m1)


class Curve(Segments):
    """log(width) against time through ``keys`` (at least one, times increasing)."""

    def __init__(self, keys: Sequence[Key]):
        with num.workprec(num.WIDTH_BITS):
            self.keys = list(keys)
            self.w = [_key_width(k) for k in keys]
            super().__init__([k.time_exact for k in keys], [num.mpmath.log(w) for w in self.w],
                             [k.interpolation for k in keys], _mpf)

    def width(self, t: Fraction) -> mpmath.mpf:
        """The width at time ``t`` seconds (an exact rational), an mpf at WIDTH_BITS."""
        with num.workprec(num.WIDTH_BITS):
            i = self.segment(t)
            if i is None:  # at a key (or outside them): the key's width exactly
                k = 0 if t <= self.t[0] else len(self.t) - 1 if t >= self.t[-1] else self.t.index(t)
                return +self.w[k]
            if self.hows[i] == "hold" or self.w[i] == self.w[i + 1]:
                return +self.w[i]
            return num.mpmath.exp(self.value(t))


class AngleCurve(Segments):
    """The angle (degrees, exact Fractions) against time through ``keys`` that carry one."""

    def __init__(self, keys: Sequence[Key]):
        super().__init__([k.time_exact for k in keys], [k.angle_exact for k in keys],
                         [k.interpolation for k in keys], lambda x: x)

    def angle(self, t: Fraction) -> Fraction:
        """The angle at time ``t`` seconds, degrees, exact."""
        return Fraction(self.value(t))


def frame_time(k: int, fps: int) -> Fraction:
    """Frame k's time in seconds, exactly."""
    return Fraction(k, fps)


def frame_angles(spec: JobSpec) -> list[Fraction]:
    """Every video frame's angle in degrees, exact (see :func:`angles_of`)."""
    return angles_of(spec, range(spec.frames))


def angles_of(spec: JobSpec, frames: Sequence[int]) -> list[Fraction]:
    """The angles of some video frames, degrees counter-clockwise, exact rationals: the
    keys' angle curve when they carry one, else ``view.angle + turn * k / fps``."""
    from farm.spec.keys import exact, keyed_angles

    keys, fps = spec.animation.keys, spec.animation.fps
    if keyed_angles(keys):
        curve = AngleCurve(keys)
        return [curve.angle(frame_time(k, fps)) for k in frames]
    start, turn = exact(spec.view.angle), exact(spec.animation.turn)
    return [start + turn * frame_time(k, fps) for k in frames]


def frame_widths(spec: JobSpec) -> list[mpmath.mpf]:
    """Every video frame's width (mpf, WIDTH_BITS): the keys' curve, or the constant
    zoom speed from view.width[0] to view.width[1] without keys."""
    return widths_of(spec, range(spec.frames))


def widths_of(spec: JobSpec, frames: Sequence[int]) -> list[mpmath.mpf]:
    """The widths of some video frames (as :func:`frame_widths` gives them)."""
    keys = spec.animation.keys
    if not keys:
        return [num.frame_width(*spec.view.width, k, spec.frames) for k in frames]
    curve = Curve(keys)
    return [curve.width(frame_time(k, spec.animation.fps)) for k in frames]
