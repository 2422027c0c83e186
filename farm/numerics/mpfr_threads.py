"""Long reference orbits on two cores: MPFR through ctypes, the complex square's two
multiplications at once.

One step of an orbit, z <- z^2 + c with z = x + i y, is

    x' = (x + y)(x - y) + cr        y' = 2 x y + ci

two multiplications that do not depend on each other. gmpy2 holds Python's GIL
while it multiplies, so two Python threads calling it run one after the other;
ctypes releases the GIL around every foreign call, so MPFR called through ctypes
multiplies (x + y)(x - y) on this thread while a helper thread multiplies x y.
Measured on a 2-core machine (benchmarks/orbit_engines.py, best of 8, the second
core free): a step at 100,000 digits (332k bits) takes 0.86 ms here against 1.60 ms
for gmpy2 on one thread (1.98 ms in the form x^2 - y^2 that farm/numerics/orbiters.py
used before); at 30,000 digits 0.22 ms against 0.33; at 20,000 0.14 against 0.19; at
15,000 0.112 against 0.124; at 10,000 the hand-over between threads costs more than it
saves (0.089 ms against 0.075). While other work holds the second core, the threads
gain nothing (and lose a little below 30,000 digits): :data:`THREAD_BITS` sits above
the crossover (about 45k bits) for that.

The library is the MPFR that gmpy2's wheel ships (gmpy2.libs: gmpy2 is a dependency
anyway), else the system's libmpfr; :func:`available` says whether either loads.
gmpy2 sets no GMP memory functions of its own, so the helper thread may allocate
without the GIL. This module does not import gmpy2: values cross as strings
(decimal in, base 16 out, both exact).

The mpfr_t layout is MPFR's on LP64 systems: precision (long), sign (int), exponent
(long), limb pointer.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os
import threading
from functools import cache

from farm.runtime.cores import usable_cores

THREAD_BITS = 64_000  # orbits at this precision and above run on two threads
RNDN = 0


class _Mpfr(ctypes.Structure):
    _fields_ = [("prec", ctypes.c_long), ("sign", ctypes.c_int), ("exp", ctypes.c_long),
                ("d", ctypes.c_void_p)]


_P = ctypes.POINTER(_Mpfr)


def _candidates() -> list[str]:
    """Paths of libmpfr to try: gmpy2's own, then the system's."""
    out = []
    spec = importlib.util.find_spec("gmpy2")
    if spec is not None and spec.submodule_search_locations:
        here = os.path.dirname(list(spec.submodule_search_locations)[0])
        out += sorted(glob.glob(os.path.join(here, "gmpy2.libs", "libmpfr*.so*")))
    system = ctypes.util.find_library("mpfr")
    if system:
        out.append(system)
    return out


@cache
def _lib() -> ctypes.CDLL | None:
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("mpfr_mul", "mpfr_add", "mpfr_sub"):
            getattr(lib, name).argtypes = [_P, _P, _P, ctypes.c_int]
        lib.mpfr_mul_2ui.argtypes = [_P, _P, ctypes.c_ulong, ctypes.c_int]
        lib.mpfr_add_ui.argtypes = [_P, _P, ctypes.c_ulong, ctypes.c_int]
        lib.mpfr_set.argtypes = [_P, _P, ctypes.c_int]
        lib.mpfr_init2.argtypes = [_P, ctypes.c_long]
        lib.mpfr_clear.argtypes = [_P]
        lib.mpfr_set_str.argtypes = [_P, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
        lib.mpfr_get_d_2exp.argtypes = [ctypes.POINTER(ctypes.c_long), _P, ctypes.c_int]
        lib.mpfr_get_d_2exp.restype = ctypes.c_double
        lib.mpfr_get_str.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_long), ctypes.c_int,
                                     ctypes.c_size_t, _P, ctypes.c_int]
        lib.mpfr_get_str.restype = ctypes.c_void_p
        lib.mpfr_free_str.argtypes = [ctypes.c_void_p]
        return lib
    return None


def available() -> bool:
    """Whether MPFR loads and this process may run on two cores or more."""
    return usable_cores() >= 2 and _lib() is not None


class _Number:
    """One MPFR number owned by Python (cleared when collected)."""

    def __init__(self, lib: ctypes.CDLL, bits: int, text: str = "0", base: int = 10):
        self._lib = lib
        self.v = _Mpfr()
        lib.mpfr_init2(ctypes.byref(self.v), bits)
        if lib.mpfr_set_str(ctypes.byref(self.v), text.encode(), base, RNDN):
            raise ValueError(f"not a base-{base} number: {text[:40]}")
        self.p = ctypes.byref(self.v)

    def __del__(self):
        self._lib.mpfr_clear(self.p)

    def hex(self) -> str:
        """The exact value as MPFR's base-16 text ("-0.1a2b@3": 0.1a2b x 16^3)."""
        exp = ctypes.c_long()
        ptr = self._lib.mpfr_get_str(None, ctypes.byref(exp), 16, 0, self.p, RNDN)
        digits = ctypes.string_at(ptr).decode()
        self._lib.mpfr_free_str(ptr)
        if not digits.strip("-0"):
            return "0"
        sign = "-" if digits.startswith("-") else ""
        return f"{sign}0.{digits.lstrip('-')}@{exp.value}"


class Orbiter:
    """z <- z^2 + c at ``bits`` bits in MPFR, the two multiplications of each step on
    two threads. ``c`` and the start ``z`` are texts in ``base`` (10, or 16 as
    :meth:`hex` writes them), each rounded once to ``bits`` bits (as gmpy2.mpfr rounds
    them). Use as a context manager, or close() it: the helper thread stops then."""

    def __init__(self, c: tuple[str, str], bits: int, z: tuple[str, str] = ("0", "0"),
                 base: int = 10):
        lib = _lib()
        if lib is None:
            raise RuntimeError("MPFR could not be loaded")
        self._lib, self.bits = lib, bits
        self._cr, self._ci = _Number(lib, bits, c[0], base), _Number(lib, bits, c[1], base)
        self._x, self._y = _Number(lib, bits, z[0], base), _Number(lib, bits, z[1], base)
        self._x2, self._y2 = _Number(lib, bits), _Number(lib, bits)
        self._s, self._d, self._t = _Number(lib, bits), _Number(lib, bits), _Number(lib, bits)
        self._go, self._done = threading.Lock(), threading.Lock()
        self._go.acquire()
        self._done.acquire()
        self._stop = False
        self._exp = ctypes.c_long()
        self._helper = threading.Thread(target=self._multiply_xy, daemon=True)
        self._helper.start()

    def _multiply_xy(self) -> None:
        mul, t = self._lib.mpfr_mul, self._t.p
        while True:
            self._go.acquire()
            if self._stop:
                return
            mul(t, self._x.p, self._y.p, RNDN)
            self._done.release()

    def step(self) -> None:
        """One step: z <- z^2 + c."""
        lib, x, y, s, d = self._lib, self._x.p, self._y.p, self._s.p, self._d.p
        self._go.release()  # the helper: t = x y
        lib.mpfr_add(s, x, y, RNDN)
        lib.mpfr_sub(d, x, y, RNDN)
        lib.mpfr_mul(self._x2.p, s, d, RNDN)
        self._done.acquire()
        lib.mpfr_add(self._x2.p, self._x2.p, self._cr.p, RNDN)
        lib.mpfr_mul_2ui(self._y2.p, self._t.p, 1, RNDN)
        lib.mpfr_add(self._y2.p, self._y2.p, self._ci.p, RNDN)
        self._x, self._x2 = self._x2, self._x
        self._y, self._y2 = self._y2, self._y

    def parts(self) -> tuple[float, int, float, int]:
        """(mx, ex, my, ey): x = mx 2^ex, y = my 2^ey, |m| in [0.5, 1) or 0: z at any
        depth, each part rounded once to 53 bits."""
        g, e = self._lib.mpfr_get_d_2exp, self._exp
        mx = g(ctypes.byref(e), self._x.p, RNDN)
        ex = e.value
        my = g(ctypes.byref(e), self._y.p, RNDN)
        return mx, ex, my, e.value

    def hex(self) -> tuple[str, str]:
        """z exactly, as base-16 texts (see _Number.hex)."""
        return self._x.hex(), self._y.hex()

    def close(self) -> None:
        if not self._stop:
            self._stop = True
            self._go.release()
            self._helper.join()

    def __enter__(self) -> Orbiter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class NewtonOrbiter(Orbiter):
    """z <- z^2 + c with its derivative dz <- 2 z dz + 1 (Newton's method for nuclei
    and Misiurewicz points, farm/numerics/newton.py), six products a step, three on
    each thread: (x + y)(x - y), x u, y v here and x y, x v, y u on the helper (z = x +
    i y, dz = u + i v, both from the step before)."""

    def __init__(self, c: tuple[str, str], bits: int, base: int = 10):
        super().__init__(c, bits, base=base)
        lib = self._lib
        self._u, self._v = _Number(lib, bits), _Number(lib, bits)
        self._u2, self._v2 = _Number(lib, bits), _Number(lib, bits)
        self._p3, self._p4 = _Number(lib, bits), _Number(lib, bits)
        self._p5, self._p6 = _Number(lib, bits), _Number(lib, bits)

    def _multiply_xy(self) -> None:
        mul = self._lib.mpfr_mul
        while True:
            self._go.acquire()
            if self._stop:
                return
            x, y = self._x.p, self._y.p
            mul(self._t.p, x, y, RNDN)
            mul(self._p5.p, x, self._v.p, RNDN)
            mul(self._p6.p, y, self._u.p, RNDN)
            self._done.release()

    def step(self) -> None:
        lib, x, y, s, d = self._lib, self._x.p, self._y.p, self._s.p, self._d.p
        self._go.release()  # the helper: x y, x v, y u
        lib.mpfr_add(s, x, y, RNDN)
        lib.mpfr_sub(d, x, y, RNDN)
        lib.mpfr_mul(self._x2.p, s, d, RNDN)
        lib.mpfr_mul(self._p3.p, x, self._u.p, RNDN)
        lib.mpfr_mul(self._p4.p, y, self._v.p, RNDN)
        self._done.acquire()
        lib.mpfr_add(self._x2.p, self._x2.p, self._cr.p, RNDN)
        lib.mpfr_mul_2ui(self._y2.p, self._t.p, 1, RNDN)
        lib.mpfr_add(self._y2.p, self._y2.p, self._ci.p, RNDN)
        lib.mpfr_sub(self._u2.p, self._p3.p, self._p4.p, RNDN)  # u' = 2 (x u - y v) + 1
        lib.mpfr_mul_2ui(self._u2.p, self._u2.p, 1, RNDN)
        lib.mpfr_add_ui(self._u2.p, self._u2.p, 1, RNDN)
        lib.mpfr_add(self._v2.p, self._p5.p, self._p6.p, RNDN)  # v' = 2 (x v + y u)
        lib.mpfr_mul_2ui(self._v2.p, self._v2.p, 1, RNDN)
        self._x, self._x2 = self._x2, self._x
        self._y, self._y2 = self._y2, self._y
        self._u, self._u2 = self._u2, self._u
        self._v, self._v2 = self._v2, self._v

    def derivative_hex(self) -> tuple[str, str]:
        """dz exactly, as base-16 texts."""
        return self._u.hex(), self._v.hex()
