"""zoomfarm: a render farm for deep-zoom Mandelbrot animations.

Data flow: job spec (farm.spec) -> plan (farm.plan) -> schedule (farm.schedule)
-> compute (farm.compute, kernels/*.cl) -> store (farm.store) -> colour
(farm.color) -> encode (farm.encode). The command line is farm.cli.
"""

__version__ = "0.1.0"
