"""Shared boilerplate for the torch.compile course notebooks.

Modules, one job each:

- ``helpers.device``: the devices here, their names, waiting for them (``synchronize``).
- ``helpers.guard``: may ``torch.compile`` run here, and why not (``compile_support``,
  ``maybe_compile``), applied to the cells marked ``# requires: inductor``.
- ``helpers.env``: a notebook's environment: set it up (device, seed, precision, the guard)
  and describe it (the environment card, with the machine's load).
- ``helpers.bench``: honest timing (warm-up, synchronization, interleaving, medians).
- ``helpers.plot``: eager vs compiled latency and break-even charts.
- ``helpers.models``: the course's MLP and GPT-2 (built from a config, no download).
- ``helpers.counters``: graphs, graph breaks, recompilations and cache hits, for asserts.
- ``helpers.logs``: torch's log records (graph breaks, guards), generated code and max-autotune's
  timings read as text, paths cut.
- ``helpers.memory``: the peak memory of a call (one method per device) and the activations
  a forward pass saves for the backward pass.
- ``helpers.cache``: compiling in a fresh process with its own cache (cold and warm starts).
- ``helpers.ddp_demo``: the process plumbing of a compiled DDP run on CPU processes.
- ``helpers.decoding``: static-cache greedy decoding and the bytes a decoding step reads.
- ``helpers.quantize``: weight-only int8 layers (gpt-fast's), and a check that a compiled step
  kept its quantization.
- ``helpers.exercises``: the self-check every exercise ends with (``check_answer``), and each
  notebook's exercise checks (``helpers.exercises.nb01`` ...), tested with wrong answers.
- ``helpers.tables``: a table a notebook shows (rendered, not printed as raw pipes).

Importing ``helpers`` imports nothing heavy; import the modules you need.
"""

__version__ = "0.1.0"
#: Lets a notebook check that ``import helpers`` found this course's package, not a namesake.
COURSE = "torch-compile-course"
