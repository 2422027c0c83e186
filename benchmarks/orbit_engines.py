#!/usr/bin/env python3
"""One step of a reference orbit, z <- z^2 + c, at 10k, 30k and 100k digits, by engine.

    python3 benchmarks/orbit_engines.py [ROUNDS]      # best of ROUNDS (default 6)

Engines (the farm's are farm/numerics/period.py's orbiters):

  gmpy2 x^2-y^2      gmpy2, one thread, x' = x^2 - y^2 + cr, y' = 2xy + ci (three
                     products: the farm's form before issue 23)
  gmpy2 (x+y)(x-y)   gmpy2, one thread, two products (GmpyOrbiter)
  MPFR 2 threads     MPFR through ctypes, (x+y)(x-y) here and x y on a helper thread
                     at once (ThreadedOrbiter: ctypes releases the GIL, gmpy2 does not)
  2 processes        gmpy2, x y in a second process, numbers through a pipe
  flint arb 1/2 thr  python-flint's arb (if installed), ctx.threads 1 and 2

The point is inside the main cardioid with random digits to full length (an orbit
that neither escapes nor has short numbers). Each engine's time is the best of
ROUNDS runs, to see past other work on a shared machine; the load average is
printed. Results: BENCHMARKS.md, "Reference orbits".
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import sys
import time

import gmpy2
from gmpy2 import mpfr

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from farm.numerics import mpfr_threads  # noqa: E402
from farm.numerics import period as per  # noqa: E402


def centre(digits: int, seed: int = 5) -> tuple[str, str]:
    rnd = random.Random(seed)
    tail = "".join(rnd.choice("0123456789") for _ in range(digits))
    return "-0.1" + tail, "0.1" + tail[::-1]


def steps_of(c: tuple[str, str], bits: int) -> int:
    return max(20, int(3e8 / bits**1.2))


def old_form(c, bits, steps):
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        cr, ci = mpfr(c[0]), mpfr(c[1])
        x = y = xx = yy = mpfr(0)
        for _ in range(12):
            y = 2 * x * y + ci
            x = xx - yy + cr
            xx, yy = x * x, y * y
        t = time.perf_counter()
        for _ in range(steps):
            y = 2 * x * y + ci
            x = xx - yy + cr
            xx, yy = x * x, y * y
            float(x), float(y)
        return (time.perf_counter() - t) / steps


def orbiter(kind):
    def run(c, bits, steps):
        o = kind(per.parse(c, bits), bits)
        try:
            for _ in range(12):
                o.step()
            t = time.perf_counter()
            for _ in range(steps):
                o.step()
                o.point()
            return (time.perf_counter() - t) / steps
        finally:
            o.close()
    return run


def _helper(conn, bits):
    gmpy2.get_context().precision = bits
    while True:
        msg = conn.recv_bytes()
        if not msg:
            return
        x, y = (gmpy2.from_binary(part) for part in msg.split(b"\0SEP\0"))
        conn.send_bytes(gmpy2.to_binary(x * y))


def processes(c, bits, steps):
    a, b = mp.Pipe()
    p = mp.get_context("fork").Process(target=_helper, args=(b, bits), daemon=True)
    p.start()
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        cr, ci = mpfr(c[0]), mpfr(c[1])
        x, y = mpfr(c[0]), mpfr(c[1])
        t = time.perf_counter()
        for _ in range(steps):
            a.send_bytes(gmpy2.to_binary(x) + b"\0SEP\0" + gmpy2.to_binary(y))
            s = (x + y) * (x - y) + cr
            x, y = s, gmpy2.mul_2exp(gmpy2.from_binary(a.recv_bytes()), 1) + ci
            float(x), float(y)
        dt = (time.perf_counter() - t) / steps
    a.send_bytes(b"")
    p.join()
    return dt


def flint_arb(threads):
    def run(c, bits, steps):
        import flint

        flint.ctx.prec, flint.ctx.threads = bits, threads
        cr, ci = flint.arb(c[0]), flint.arb(c[1])
        x = y = flint.arb(0)
        t = time.perf_counter()
        for _ in range(steps):
            x, y = ((x + y) * (x - y) + cr).mid(), (2 * x * y + ci).mid()
            float(x), float(y)
        return (time.perf_counter() - t) / steps
    return run


ENGINES = {"gmpy2 x^2-y^2": old_form, "gmpy2 (x+y)(x-y)": orbiter(per.GmpyOrbiter)}
if mpfr_threads.available():
    ENGINES["MPFR 2 threads"] = orbiter(per.ThreadedOrbiter)
ENGINES["2 processes"] = processes
try:
    import flint  # noqa: F401

    ENGINES["flint arb 1 thr"] = flint_arb(1)
    ENGINES["flint arb 2 thr"] = flint_arb(2)
except ImportError:
    pass


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}; best of {rounds}")
    print("digits  bits    " + "".join(f"{k:>20s}" for k in ENGINES))
    for digits in (10_000, 30_000, 100_000):
        c, bits = centre(digits), int(digits * 3.3219) + 64
        best = dict.fromkeys(ENGINES, float("inf"))
        for _ in range(rounds):
            for name, run in ENGINES.items():
                best[name] = min(best[name], run(c, bits, steps_of(c, bits)))
        print(f"{digits:<7d} {bits:<7d} " + "".join(f"{v * 1e3:17.3f} ms" for v in best.values()),
              flush=True)
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
