"""One-line ways to assert what the compiler did: graphs, breaks, recompilations, cache hits.

``graph_report`` asks ``torch._dynamo.explain``; ``CompileCounts`` is a context manager
that reads Dynamo's counters and compilation metrics before and after a block.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._dynamo import utils as dynamo_utils


@dataclass(frozen=True)
class GraphReport:
    """How Dynamo splits a function into graphs, from ``torch._dynamo.explain``.

    Example:
        >>> report = graph_report(lambda x: torch.sin(x) + 1, torch.randn(3))
        >>> report.graph_count, report.graph_break_count
        (1, 0)
        >>> torch._dynamo.reset()  # free the compiled code while this example's globals exist
    """

    graph_count: int
    graph_break_count: int
    break_reasons: tuple[str, ...]
    op_count: int

    def __str__(self) -> str:
        lines = [
            f"graphs: {self.graph_count}, graph breaks: {self.graph_break_count}, "
            f"ops captured: {self.op_count}"
        ]
        lines += [f"  break {i}: {reason}" for i, reason in enumerate(self.break_reasons, 1)]
        return "\n".join(lines)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def short_reason(text: str) -> str:
    """A guard-failure reason as a learner reads it: first line, no ``0/1:`` frame id, no source,
    submodules spelt as in Python (``m.h[0]``, not ``m._modules['h']._modules['0']``), no object ids.

    Dynamo writes ``"0/0: n == 2   # <string>:5 in <lambda>"``; the frame id and the source
    location differ between runs and machines (and torch 2.8 adds a "(HINT: ...)"), the guard
    in the middle is the lesson.

    Example:
        >>> short_reason("0/0: n == 2                #   # <string>:5 in <lambda>")
        'n == 2'
        >>> short_reason("0/1: self.scale == 2 (HINT: torch.compile considers integer attributes ...)")
        'self.scale == 2'
        >>> short_reason("0/1: ___check_type_id(m._modules['h']._modules['0'], 93), type=<class 'Linear'>")
        'type(m.h[0]) is Linear'
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str (a guard-failure reason); got {type(text).__name__}")
    line = _first_line(text)
    head, sep, rest = line.partition(": ")
    if sep and all(part.isdigit() for part in head.split("/")):
        line = rest
    # torch 2.8 appends a long "(HINT: ...)" to some reasons; later releases do not.
    line = line.split("  #")[0].split(" # ")[0].split(" (HINT:")[0].strip()
    # submodules as Python spells them, and an identity guard's object id (a memory address) dropped
    line = re.sub(r"\._modules\['(\d+)'\]", r"[\1]", line)
    line = re.sub(r"\._modules\['(\w+)'\]", r".\1", line)
    line = re.sub(r"___check_type_id\((.+?), \d+\), type=<class '([\w.]+)'>", r"type(\1) is \2", line)
    return re.sub(r"___check_obj_id\((.+?), \d+\)", r"\1 is the same object as before", line)


def graph_report(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> GraphReport:
    """Run ``torch._dynamo.explain(fn)(*args, **kwargs)`` and keep the countable facts.

    Each break reason is reduced to its first line (the rest is a stack trace that
    differs between machines).

    Example (a function with a graph break is in tests/test_models_counters_env.py: Dynamo keeps
    its resume function alive until exit, which a doctest's namespace does not survive):
        >>> print(graph_report(lambda x: torch.cos(x) * 2, torch.zeros(1)))
        graphs: 1, graph breaks: 0, ops captured: 2
        >>> torch._dynamo.reset()
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function or an nn.Module; got {type(fn).__name__}")
    explained = torch._dynamo.explain(fn)(*args, **kwargs)
    reasons = tuple(_first_line(str(b.reason)) for b in explained.break_reasons)
    return GraphReport(
        graph_count=explained.graph_count,
        graph_break_count=explained.graph_break_count,
        break_reasons=reasons,
        op_count=explained.op_count,
    )


# The one table of counter keys in torch._dynamo.utils.counters, by the attribute name used here
# (tests/test_models_counters_env.py makes each one move in a real compile, on every release).
_COUNTER_KEYS = {
    "graphs": ("stats", "unique_graphs"),
    "fxgraph_cache_hits": ("inductor", "fxgraph_cache_hit"),
    "fxgraph_cache_misses": ("inductor", "fxgraph_cache_miss"),
    "fxgraph_cache_bypasses": ("inductor", "fxgraph_cache_bypass"),
    "autograd_cache_hits": ("aot_autograd", "autograd_cache_hit"),
    "autograd_cache_misses": ("aot_autograd", "autograd_cache_miss"),
    "cudagraph_skips": ("inductor", "cudagraph_skips"),
}


def _snapshot() -> dict[str, int]:
    counters = dynamo_utils.counters
    return {name: int(counters[group][key]) for name, (group, key) in _COUNTER_KEYS.items()}


# Dynamo names the function it resumes in after a graph break ``torch_dynamo_resume_in_<fn>_at_<line>``
# (torch/_dynamo/resume_execution.py, the same on every release the course accepts).
try:
    from torch._dynamo.resume_execution import TORCH_DYNAMO_RESUME_IN_PREFIX as _RESUME_PREFIX
except ImportError:  # pragma: no cover - a release that moved it; the name itself is stable
    _RESUME_PREFIX = "torch_dynamo_resume_in"


def _is_frame(record: Any) -> bool:
    """A compilation record of a Python frame Dynamo compiled (not a failed one, not a backward).

    AOTAutograd adds a record with no code name (``is_forward=False``) when it compiles a backward
    graph, and only on a cache miss: counting it would make ``frames`` depend on the cache.
    """
    return (
        not getattr(record, "fail_type", None)
        and getattr(record, "co_name", None) is not None
        and getattr(record, "is_forward", True) is not False
    )


def _is_resume_after_break(record: Any) -> bool:
    """A frame Dynamo compiled to resume after a graph break (see ``CompileCounts.graph_breaks``)."""
    return _is_frame(record) and str(record.co_name).startswith(_RESUME_PREFIX)


@dataclass
class CompileCounts:
    """Counts what the compiler did inside a ``with`` block.

    Attributes (all deltas over the block), read from Dynamo's compilation records
    (``torch._dynamo.utils.get_compilation_metrics()``) and counters (``torch._dynamo.utils.counters``):

    - ``frames``: Python frames Dynamo compiled, one per compilation or recompilation, with or
      without ``fullgraph=True``; a failed compile and AOTAutograd's backward record are not frames.
    - ``graphs``: FX graphs handed to the backend (``counters["stats"]["unique_graphs"]``).
    - ``graph_breaks``: frames Dynamo compiled to resume after a graph break, whatever its kind
      (data-dependent branch, print, ``.item()``, unsupported call). That is one per break in the
      function compiled; a break inside a function it calls resumes two frames (the callee's and
      the caller's), and a resume frame that recompiles counts again, so it can exceed the number
      of break reasons Dynamo records. A break before the first operation counts too, though
      ``torch._dynamo.explain`` cannot list it: no graph ends there.
    - ``recompilations`` and ``recompile_reasons`` (the guard that failed on a frame compiled
      before, as :func:`short_reason` gives it).
    - FX-graph and AOTAutograd cache ``*_hits``/``*_misses``, and ``cudagraph_skips``.

    Example:
        >>> torch._dynamo.reset()
        >>> f = torch.compile(lambda x: x * 2, backend="eager")
        >>> with CompileCounts() as counts:
        ...     _ = f(torch.ones(2)); _ = f(torch.ones(2, dtype=torch.float64))
        >>> counts.frames, counts.recompilations, counts.recompile_reasons
        (2, 1, ["tensor 'x' dtype mismatch. expected Float, actual Double"])
        >>> torch._dynamo.reset()  # free the compiled code while this example's globals exist
    """

    frames: int = 0
    graphs: int = 0
    graph_breaks: int = 0
    recompilations: int = 0
    recompile_reasons: list[str] = field(default_factory=list)
    fxgraph_cache_hits: int = 0
    fxgraph_cache_misses: int = 0
    fxgraph_cache_bypasses: int = 0
    autograd_cache_hits: int = 0
    autograd_cache_misses: int = 0
    cudagraph_skips: int = 0
    _before: dict[str, int] = field(default_factory=dict, repr=False)
    _seen_metrics: set[int] = field(default_factory=set, repr=False)

    def __enter__(self) -> CompileCounts:
        # Keep enough compilation records to see every recompilation in the block.
        if dynamo_utils._compilation_metrics.maxlen < 4096:
            dynamo_utils.set_compilation_metrics_limit(4096)
        self._seen_metrics = {id(m) for m in dynamo_utils.get_compilation_metrics()}
        self._before = _snapshot()
        return self

    def __exit__(self, *exc_info: object) -> None:
        after = _snapshot()
        for name, value in after.items():
            setattr(self, name, value - self._before[name])
        new = [m for m in dynamo_utils.get_compilation_metrics() if id(m) not in self._seen_metrics]
        # One record per frame compile; a failed one (e.g. past the recompile limit) compiled nothing.
        self.frames = sum(1 for m in new if _is_frame(m))
        self.graph_breaks = sum(1 for m in new if _is_resume_after_break(m))
        reasons = [m.recompile_reason for m in new if m.recompile_reason]
        self.recompilations = len(reasons)
        self.recompile_reasons = [short_reason(r) for r in reasons]

    def as_dict(self) -> dict[str, Any]:
        """Every count by name (JSON-serializable), e.g. for a child process to report.

        Example:
            >>> CompileCounts(frames=1, graphs=1).as_dict()["fxgraph_cache_hits"]
            0
        """
        return {name: getattr(self, name) for name in (*_COUNT_NAMES, "recompile_reasons")}

    def summary(self) -> str:
        """The non-zero counts, one line (stable text for a compared notebook cell)."""
        return ", ".join(f"{n}={getattr(self, n)}" for n in _COUNT_NAMES if getattr(self, n))


# The integer counts of CompileCounts, in the order summary() prints them.
_COUNT_NAMES = (
    "frames",
    "graphs",
    "graph_breaks",
    "recompilations",
    *(name for name in _COUNTER_KEYS if name != "graphs"),
)
