"""Each frame's width: a constant zoom speed, or a timing curve through waypoints.

Without keys (DESIGN.md's contract): frame ``k`` of ``F`` has width
``w0 (w1/w0)^(k/(F-1))``; ``F = 1`` renders ``w0``.

With ``[[animation.keys]]`` (farm/waypoints.py), frame ``k`` shows time ``t = k / fps``
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
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

import farm.numerics as num

if TYPE_CHECKING:
    import mpmath

    from farm.spec import JobSpec
    from farm.waypoints import Key


def _mpf(x: Fraction) -> mpmath.mpf:
    return num.mpf(x.numerator) / x.denominator


def _key_width(key: Key) -> mpmath.mpf:
    if key.width is not None:
        return num.mpf(key.width)
    return 4 / num.mpf(key.zoom)


def _limited(m: mpmath.mpf, d: mpmath.mpf) -> mpmath.mpf:
    """Slope ``m`` for a cubic segment of mean slope ``d``: 0 against its sign, at most 3 d."""
    if m * d <= 0:
        return num.mpf(0)
    return min(abs(m), 3 * abs(d)) * (1 if d > 0 else -1)


def _steffen(d0: mpmath.mpf, d1: mpmath.mpf, h0: mpmath.mpf, h1: mpmath.mpf) -> mpmath.mpf:
    if d0 * d1 <= 0:
        return num.mpf(0)
    p = (d0 * h1 + d1 * h0) / (h0 + h1)
    sign = 1 if d0 > 0 else -1
    return 2 * sign * min(abs(d0), abs(d1), abs(p) / 2)


class Curve:
    """log(width) against time through ``keys`` (at least one, times increasing)."""

    def __init__(self, keys: Sequence[Key]):
        with num.workprec(num.WIDTH_BITS):
            self.keys = list(keys)
            self.t = [k.time_exact for k in keys]
            self.w = [_key_width(k) for k in keys]
            self.y = [num.mpmath.log(w) for w in self.w]
            self.h = [_mpf(b - a) for a, b in zip(self.t, self.t[1:], strict=False)]
            self.d = [(self.y[i + 1] - self.y[i]) / self.h[i] for i in range(len(self.h))]
            self.m = [self._slope(i) for i in range(len(keys))]

    def _slope(self, i: int) -> mpmath.mpf:
        if i == 0 or i == len(self.keys) - 1:
            return num.mpf(0)
        left, right = self.keys[i - 1].interpolation, self.keys[i].interpolation
        if "hold" in (left, right):
            return num.mpf(0)
        dl, dr = self.d[i - 1], self.d[i]
        if left == "linear":
            return _limited(dl, dr) if right == "cubic" else dl
        if right == "linear":
            return _limited(dr, dl)
        return _steffen(dl, dr, self.h[i - 1], self.h[i])

    def width(self, t: Fraction) -> mpmath.mpf:
        """The width at time ``t`` seconds (an exact rational), an mpf at WIDTH_BITS."""
        with num.workprec(num.WIDTH_BITS):
            if t <= self.t[0]:
                return +self.w[0]
            if t >= self.t[-1]:
                return +self.w[-1]
            i = bisect.bisect_right(self.t, t) - 1
            if t == self.t[i]:
                return +self.w[i]
            how = self.keys[i].interpolation
            if how == "hold" or self.w[i] == self.w[i + 1]:  # a still (both slopes are 0)
                return +self.w[i]
            s = _mpf((t - self.t[i]) / (self.t[i + 1] - self.t[i]))
            y0, y1 = self.y[i], self.y[i + 1]
            if how == "linear":
                y = y0 + s * (y1 - y0)
            else:
                h, m0, m1 = self.h[i], self.m[i], self.m[i + 1]
                s2, s3 = s * s, s * s * s
                y = ((2 * s3 - 3 * s2 + 1) * y0 + (s3 - 2 * s2 + s) * h * m0
                     + (3 * s2 - 2 * s3) * y1 + (s3 - s2) * h * m1)
            return num.mpmath.exp(y)


def frame_time(k: int, fps: int) -> Fraction:
    """Frame k's time in seconds, exactly."""
    return Fraction(k, fps)


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
