"""Minibrots along a Misiurewicz point's spiral, at any depth, in about three orbits
of the last period (issue 45).

Near a Misiurewicz point M of preperiod k and cycle period q, the set is
asymptotically self-similar about M (Tan Lei): with lambda = (f^q)'(z_k(M)), the
multiplier of the repelling cycle M's orbit lands on, the picture at M + u looks
like the picture at M + u / lambda, turned and shrunk. A minibrot of period P whose
nucleus is M + u has a twin of period P + q at about M + u / lambda, |lambda|^2 times
narrower (its multiplier and its derivative each grow by lambda over the extra
period). So the members of one family, M + u_m with period P + m q, go as deep as
one likes, each about |u_m|^2 wide.

The prediction u_m ~ u_j lambda^(j - m) from the member at level j is off by about
|u_j| / r relative, r the width of M's own neighbourhood (first-order terms: lambda
and the orbit depend on c): it is known to b_j = log2 (r / |u_j|) bits. One Newton
iteration doubles that. So the levels go n/2, n/4, ... (each one iteration,
newton.nucleus_step: all a prediction needs), and the level before the last sits a
little deeper than n/2, where one iteration from its prediction resolves the last
member to its width; Newton's method then converges there in one iteration and
shows it in a second (newton.nucleus). In all: two orbits of the last period, one of
the level before, half of that before it, ...: about three. A descent of
Misiurewicz points to the same depth costs a dozen Newton iterations at each of its
levels (farm/film/find.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from gmpy2 import mpc

from farm.numerics.mpfr_points import log2_abs, precision
from farm.numerics.newton import nucleus, nucleus_step

KNOWN_SLACK = 12  # a prediction from level j is known to log2(r / |u_j|) - 12 bits at least
MARGIN = 96  # bits beyond the last member's width it is resolved to (find.MARGIN_BITS)
MEMBER_OFF = -3  # a nucleus further than 2^-3 |u| from its prediction is another one


class SpiralError(ValueError):
    """The family could not be followed (no repelling cycle, or Newton left it)."""


def levels(n: int, offset: float) -> list[int]:
    """The levels on the way to level n, ascending: n itself, the one before it
    ``offset`` deeper than n / 2, and halves from there down to 1."""
    out, m = [n], math.ceil(n / 2 + offset)
    while 1 <= m < out[-1]:
        out.append(m)
        m = -(-m // 2)
    return out[::-1]


def follow(point: mpc, period: int, lam: mpc, first: mpc, first_period: int,
           first_log2_width: float, log2_width: float, log2_reach: float,
           bits_for: Callable[[float], int],
           said: Callable[[int, float], None] = lambda period, log2_width: None
           ) -> tuple[mpc, int, float]:
    """The member of ``first``'s family (a nucleus near the Misiurewicz point
    ``point`` whose cycle has that period and the multiplier ``lam``,
    ``first_period``, ``first_log2_width``) whose width is nearest 2^log2_width: (its
    nucleus, its period, log2 of its width as the family predicts it). ``point`` and
    ``lam`` must be exact to bits_for(log2_width); ``log2_reach``: log2 of the width of
    the point's neighbourhood (the view it was found in); ``bits_for(w)``: the bits
    that resolve a minibrot 2^w wide; ``said(period, log2_width)`` hears of each level's
    member. :class:`SpiralError` where the family cannot be followed."""
    full = bits_for(log2_width)
    ell = log2_abs(lam)
    if not ell > 0.01:
        raise SpiralError(f"the cycle of the Misiurewicz point does not repel (|lambda| = 2^{ell:.3g})")
    n = round((first_log2_width - log2_width) / (2 * ell))
    if n < 1:
        return first, first_period, first_log2_width  # the first is already as narrow
    with precision(full):
        u = first - point
    log2_u0 = log2_abs(u)
    # one iteration from the level j before the last resolves the last (module docstring):
    # 2 (log2_reach - log2|u_j| - KNOWN_SLACK) >= MARGIN - log2|u_n|, log2|u_m| = log2_u0 - m ell
    offset = (log2_u0 - 2 * log2_reach + 2 * KNOWN_SLACK + MARGIN) / (2 * ell)
    j = 0
    for m in levels(n, offset):
        bits = bits_for(first_log2_width - 2 * m * ell)
        with precision(bits):
            guess = +point + u * (1 / lam) ** (m - j)
        log2_u = log2_abs(guess - point)
        period_m = first_period + m * period
        found = (nucleus(guess, period_m, bits, divide=False) if m == n
                 else nucleus_step(guess, period_m, bits))
        if found is None or log2_abs(found - guess) > log2_u + MEMBER_OFF:
            raise SpiralError(f"Newton's method left the spiral's family at period {period_m}")
        with precision(full):
            u = found - point
        j = m
        said(period_m, first_log2_width - 2 * m * ell)
    return found, first_period + n * period, first_log2_width - 2 * n * ell

