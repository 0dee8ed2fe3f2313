"""Shared boilerplate for the torch.compile course notebooks.

Modules, one job each:

- ``helpers.guard``: may ``torch.compile`` run here, and why not (``compile_support``,
  ``maybe_compile``).
- ``helpers.bench``: honest timing (warm-up, synchronization, interleaving, medians).
- ``helpers.plot``: eager vs compiled latency and break-even charts.
- ``helpers.models``: the course's MLP and GPT-2 (built from a config, no download).
- ``helpers.counters``: graphs, graph breaks, recompilations and cache hits, for asserts.
- ``helpers.env``: the environment card, seeding and precision settings.

Importing ``helpers`` imports nothing heavy; import the modules you need.
"""

__version__ = "0.1.0"
#: Lets a notebook check that ``import helpers`` found this course's package, not a namesake.
COURSE = "torch-compile-course"
