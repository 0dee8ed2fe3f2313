"""Shared boilerplate for the torch.compile course notebooks.

Modules, one job each:

- ``helpers.guard``: may ``torch.compile`` run here, and why not (``compile_support``,
  ``maybe_compile``).
- ``helpers.bench``: honest timing (warm-up, synchronization, interleaving, medians).
- ``helpers.plot``: eager vs compiled latency and break-even charts.
- ``helpers.models``: the course's MLP and GPT-2 (built from a config, no download).
- ``helpers.counters``: graphs, graph breaks, recompilations and cache hits, for asserts.
- ``helpers.env``: the environment card (with the machine's load), seeding, and
  ``setup_notebook`` (device, precision, the guard applied to marked cells).
- ``helpers.logs``: torch's log records (graph breaks, guards) read as text, paths cut.
- ``helpers.cache``: compile-time caches measured in fresh processes (notebook 05).
- ``helpers.memory``: peak memory of a call (notebook 02).
- ``helpers.training``: dropout-free training GPT-2, saved activations (notebook 07).
- ``helpers.ddp_demo``: the process plumbing for DDP on CPU processes (notebook 07).
- ``helpers.decoding``: static-cache greedy decoding and the bytes a decoding step reads
  (notebooks 08 and 09).

Importing ``helpers`` imports nothing heavy; import the modules you need.
"""

__version__ = "0.1.0"
#: Lets a notebook check that ``import helpers`` found this course's package, not a namesake.
COURSE = "torch-compile-course"
