"""OpenCL's start-up on threads of its own (farm/compute/clstart.py): the context a
renderer gets is the one made beside the reference orbit, it works, each is given
once, and the platforms found beside the imports are the ones pyopencl lists."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pyopencl as cl

from farm.compute import clstart
from tests.conftest import checkout_env


def _double_on(ctx: cl.Context) -> np.ndarray:
    queue = cl.CommandQueue(ctx)
    source = "kernel void k(global int *a) { a[get_global_id(0)] = 2 * get_global_id(0); }"
    prg = cl.Program(ctx, source).build()
    buf = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, 4 * 64)
    prg.k(queue, (64,), None, buf)
    out = np.empty(64, np.int32)
    cl.enqueue_copy(queue, out, buf)
    return out


def test_a_context_made_beside_is_the_one_a_renderer_takes(cl_device):
    _, dev = cl_device
    clstart.prepare_contexts([dev])
    clstart.wait_contexts()
    made = clstart.made_for(dev)
    assert made is not None
    ctx = clstart.context(dev)
    assert ctx.int_ptr == made
    assert [d.int_ptr for d in ctx.devices] == [dev.int_ptr]
    assert (_double_on(ctx) == 2 * np.arange(64)).all()
    again = clstart.context(dev)  # each is given once: the next renderer makes its own
    assert clstart.made_for(dev) is None
    assert again.int_ptr != made
    assert (_double_on(again) == 2 * np.arange(64)).all()


def test_contexts_never_taken_are_released(cl_device):
    _, dev = cl_device
    clstart.prepare_contexts([dev, dev])  # one a device
    clstart.wait_contexts()
    assert clstart.made_for(dev) is not None
    clstart.release_unused()
    assert clstart.made_for(dev) is None
    assert (_double_on(clstart.context(dev)) == 2 * np.arange(64)).all()


def test_programs_built_ahead_are_the_ones_the_renderer_uses(cl_device):
    """build_ahead builds the first frame's kernel on the context made beside the
    start; the renderer that takes that context gets the very same program (no second
    build) and renders what a renderer of its own context does. Without such a context
    nothing is built."""
    from conftest import make_spec, render_frame

    from farm.compute import programs
    from farm.compute.program_choice import build_ahead
    from farm.compute.render import TileRenderer
    from farm.plan import make_plan

    info, dev = cl_device
    plan = make_plan(make_spec(size=(24, 16), tile=(16, 16)))
    clstart.release_unused()
    assert build_ahead(dev, info, plan, shuffle=False) == []  # no context made: nothing built
    clstart.prepare_contexts([dev])
    built = build_ahead(dev, info, plan, shuffle=True)
    assert len(built) == 2  # the first frame's kernel, the shuffle (a short histogram: no hist_top)
    renderer = TileRenderer(dev, info, plan)
    _, sources, options = renderer.choice.kernel(plan.frames[0])
    assert programs.build(renderer.ctx, sources, options) is built[0]
    assert programs.build(renderer.ctx, ("shuffle.cl",)) is built[1]
    got = np.zeros((16, 24), np.uint32)
    for tile in plan.grid:
        res = renderer.render(plan.frames[0], tile)
        got[tile.y0:tile.y0 + tile.height, tile.x0:tile.x0 + tile.width] = res.iterations
    renderer.close()
    want, _ = render_frame(cl_device, plan)  # a context of its own
    assert np.array_equal(got, want) and got.any()


def _python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=checkout_env(None),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_platforms_found_beside_the_imports_are_pyopencls():
    listing = """
        from farm.compute.device import list_devices
        print(sorted(f"{i.ref} {i.kind} {i.name}" for i, _ in list_devices()))
        """
    plain = _python(listing)
    begun = _python("from farm.compute import clstart\nclstart.begin()\n" + textwrap.dedent(listing))
    assert plain == begun
    assert plain.strip() != "[]"


def test_farm_render_renders_on_the_context_made_beside_its_reference(write_job, tmp_path):
    job = write_job(size=(40, 24), width=("1e-20", "1e-20"), max_iter=300)
    out = _python(f"""
        import farm.cli
        from farm.compute import clstart
        context, taken = clstart.context, []
        def spy(device):
            clstart.wait_contexts()
            taken.append(clstart.made_for(device) is not None)
            return context(device)
        clstart.context = spy
        import farm.compute.render
        status = farm.cli.main(["render", {str(job)!r}, "--no-video", "--quiet", "--device", "cpu"])
        print(status, taken)
        """)
    assert out.split() == ["0", "[True]"]
