"""Notebook 11's exercises: ship a small function, start it in a fresh process, prove Dynamo traced nothing.

The learner compiles :func:`swish_norm` ahead of time with a method of their choice and writes the
artifact to a path. :func:`start_shipped` loads that artifact in a new Python process with an empty
cache directory of its own (:func:`helpers.cache.run_compile_in_fresh_process`), calls it on inputs
of the batch sizes asked for, and reports what Dynamo traced there and whether the outputs match
eager. :func:`check_shipped` (exercise 1) and :func:`check_any_batch` (exercise 2) judge that
report; they take the report itself, so that their tests need no compiler.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from helpers.cache import run_compile_in_fresh_process

#: The ways to ship compiled code the check can start (the notebook's methods that need no cache directory).
METHODS = ("mega-cache", "precompiled function", "AOTInductor package")
#: The batch of :func:`example_input` that exercise 1 ships and calls.
EXAMPLE_BATCH = 8
#: The batch sizes exercise 2 calls the shipped function with: the example's batch is among them, and
#: the largest, 64, is the top of the range the exercise asks for (a narrower range must fail).
ANY_BATCHES = (3, EXAMPLE_BATCH, 40, 64)
#: How close a shipped output must be to eager (float32 on a CPU).
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}

_START_SHIPPED = """
import json
import sys

import torch

from helpers.cache import emit_result
from helpers.counters import CompileCounts
from helpers.exercises.nb11 import TOLERANCE, example_input, swish_norm

args = json.loads(sys.argv[1])
method, artifact = args["method"], args["artifact"]
if torch.get_float32_matmul_precision() != args["matmul_precision"]:  # a precompiled function guards it
    torch.set_float32_matmul_precision(args["matmul_precision"])  # the caller's (only if it differs)
result = {"method": method, "load_error": None, "errors": {}, "matches": {}}
with CompileCounts() as counts:
    run = None
    try:
        if method == "AOTInductor package":
            run = torch._inductor.aoti_load_package(artifact)
        elif method == "precompiled function":
            with open(artifact, "rb") as file:
                run = torch.compiler.load_compiled_function(file)
        else:  # the mega-cache: fill the cache, then compile as usual
            with open(artifact, "rb") as file:
                torch.compiler.load_cache_artifacts(file.read())
            run = torch.compile(swish_norm, fullgraph=True)
    except Exception as error:
        result["load_error"] = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:160]}"
    for batch in args["batches"] if run is not None else []:
        x = example_input(batch)
        try:
            output = run(x)
            result["matches"][str(batch)] = bool(torch.allclose(output, swish_norm(x), **TOLERANCE))
        except Exception as error:
            result["errors"][str(batch)] = f"{type(error).__name__}: {' '.join(str(error).split())[:240]}"
result["frames"], result["graphs"] = counts.frames, counts.graphs
emit_result(result)
"""


def precompile_available() -> bool:
    """Whether this torch offers the precompiled function by default (``.aot_compile`` and its loader).

    Example:
        >>> isinstance(precompile_available(), bool)
        True
    """
    return hasattr(torch.compiler, "load_compiled_function") and bool(
        getattr(torch._dynamo.config, "enable_aot_compile", False)
    )


def offered_methods() -> tuple[str, ...]:
    """The methods of :data:`METHODS` this torch offers (the precompiled function only where it is on).

    Example:
        >>> set(offered_methods()) <= set(METHODS)
        True
    """
    return tuple(m for m in METHODS if m != "precompiled function" or precompile_available())


def swish_norm(x: torch.Tensor) -> torch.Tensor:
    """The function the exercises ship: a SiLU scaled by each row's norm, less the batch's mean row.

    The mean divides by ``x.shape[0]``, a Python int where Dynamo traces a static batch: a graph
    traced for one batch computes the wrong mean at another, so only a dynamic batch serves them all.

    Example:
        >>> swish_norm(torch.zeros(2, 4)).shape
        torch.Size([2, 4])
    """
    y = torch.nn.functional.silu(x) / (x.norm(dim=-1, keepdim=True) + 1.0)
    return y - y.sum(dim=0) / x.shape[0]


class SwishNorm(torch.nn.Module):
    """:func:`swish_norm` as a module, for ``torch.export.export`` (which takes a module).

    Example:
        >>> SwishNorm()(torch.zeros(1, 4)).shape
        torch.Size([1, 4])
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return swish_norm(x)


def example_input(batch: int = EXAMPLE_BATCH) -> torch.Tensor:
    """A ``(batch, 16)`` float32 input, the same on every machine for a given batch.

    Example:
        >>> example_input(3).shape
        torch.Size([3, 16])
    """
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise ValueError(f"batch must be a positive int; got {batch!r}")
    return torch.randn(batch, 16, generator=torch.Generator().manual_seed(batch))


def start_shipped(
    method: str, artifact: str | Path, batches: Sequence[int] = (EXAMPLE_BATCH,)
) -> dict[str, Any]:
    """Load ``artifact`` as ``method`` in a fresh process and call it on each batch size.

    The child has an empty cache directory, this process's float32 matmul precision (a global
    setting a precompiled function's guards check) and ``AOTI_RUNTIME_CHECK_INPUTS=1`` (so a
    package called outside its shapes raises instead of running unchecked). Returns its report:
    ``frames`` and ``graphs`` Dynamo compiled there, ``load_error``, and per batch size either
    ``matches`` (output equals eager within :data:`TOLERANCE`) or ``errors``.

    Example (a few seconds: it starts a Python process that imports torch):
        >>> report = start_shipped("precompiled function", "/no/such/file")
        >>> report["load_error"].startswith("FileNotFoundError")
        True
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    if not isinstance(artifact, (str, Path)):
        raise TypeError(f"artifact must be a path (str or pathlib.Path); got {type(artifact).__name__}")
    if isinstance(batches, (str, bytes)) or not all(
        isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in batches
    ):
        raise ValueError(f"batches must be a sequence of positive ints; got {batches!r}")
    with tempfile.TemporaryDirectory(prefix="course11-check-") as cache:
        report = run_compile_in_fresh_process(
            _START_SHIPPED,
            cache_dir=cache,
            args={
                "method": method,
                "artifact": str(artifact),
                "batches": list(batches),
                "matmul_precision": torch.get_float32_matmul_precision(),
            },
            env={"AOTI_RUNTIME_CHECK_INPUTS": "1"},
        )
    report.pop("process_s", None)
    return report


#: What a failed call's hint says, per exercise: where to look, not what to write.
_SHAPE_HINTS = {
    1: "ship it for example_input()'s shape",
    2: "your artifact does not serve every batch size asked for (it was made for one size, or for a "
    "range that does not reach them all); section 3 ('A new input shape') shows how each method lets "
    "a dimension vary",
}


def _ship_and_start(
    method: str | None, ship: Callable[[Path], Any] | None, batches: Sequence[int]
) -> dict[str, Any] | None:
    if method is None or ship is None:
        return None
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    if method not in offered_methods():
        raise AssertionError(
            f"this torch ({torch.__version__}) has no {method} by default; pick one of {offered_methods()}"
        )
    if not callable(ship):
        raise TypeError(
            f"ship must be a function that writes your artifact to a path; got {type(ship).__name__}"
        )
    with tempfile.TemporaryDirectory(prefix="course11-ship-") as folder:
        artifact = Path(folder) / ("swish_norm.pt2" if method == "AOTInductor package" else "swish_norm.bin")
        torch._dynamo.reset()  # shapes Dynamo saw before would make a static compile dynamic
        ship(artifact)
        if not artifact.exists():
            raise AssertionError(f"ship(path) wrote nothing at the path it was given ({artifact.name})")
        return start_shipped(method, artifact, batches)


def _verdict(
    exercise: int, report: Mapping[str, Any] | None, batches: Sequence[int], hint_shapes: str
) -> str:
    label = f"Exercise {exercise}"
    if report is None:
        return f"{label}: not answered yet."
    if not isinstance(report, Mapping) or "frames" not in report:
        raise TypeError("report must be the dict start_shipped() returns")
    method = report.get("method")
    if report.get("load_error"):
        raise AssertionError(
            f"{label}: the fresh process could not load your artifact ({method}): {report['load_error']}. "
            "Hint: write the file your method's loader reads (save_compiled_function, "
            "aoti_compile_and_package or save_cache_artifacts)."
        )
    if report["frames"] or report["graphs"]:
        raise AssertionError(
            f"{label}: Dynamo traced {report['frames']} frame(s) in the fresh process. Hint: a {method} "
            "skips Inductor, not Dynamo; ship what Dynamo traced too."
        )
    failed = {int(b): e for b, e in report.get("errors", {}).items()}
    if failed:
        batch, error = next(iter(failed.items()))
        raise AssertionError(
            f"{label}: calling it with a batch of {batch} failed: {error}. Hint: {hint_shapes}."
        )
    matches = {int(b): ok for b, ok in report.get("matches", {}).items()}
    if sorted(matches) != sorted(batches):
        raise AssertionError(f"{label}: the report covers batches {sorted(matches)}, not {sorted(batches)}")
    wrong = [b for b, ok in matches.items() if not ok]
    if wrong:
        raise AssertionError(
            f"{label}: the output for batch(es) {wrong} differs from eager swish_norm. "
            "Hint: compile swish_norm itself, on example_input()."
        )
    return f"{label}: correct: a fresh process loaded your {method}; Dynamo traced nothing; output == eager."


def check_shipped(method: str | None, ship: Callable[[Path], Any] | None) -> str:
    """Exercise 1: ``ship(path)`` writes :func:`swish_norm`, compiled as ``method``, to ``path``.

    A fresh process loads it and calls it on ``example_input()``; Dynamo must trace nothing there
    and the output must equal eager. ``None`` for either argument means not answered yet.

    Example:
        >>> check_shipped(None, None)
        'Exercise 1: not answered yet.'
    """
    return _verdict(
        1,
        _ship_and_start(method, ship, (EXAMPLE_BATCH,)),
        (EXAMPLE_BATCH,),
        _SHAPE_HINTS[1],
    )


def check_any_batch(method: str | None, ship: Callable[[Path], Any] | None) -> str:
    """Exercise 2: as exercise 1, but the fresh process calls it with batches :data:`ANY_BATCHES`.

    Example:
        >>> check_any_batch(None, None)
        'Exercise 2: not answered yet.'
    """
    return _verdict(
        2,
        _ship_and_start(method, ship, ANY_BATCHES),
        ANY_BATCHES,
        _SHAPE_HINTS[2],
    )


def verdict_of(exercise: int, report: Mapping[str, Any] | None) -> str:
    """Judge a report of :func:`start_shipped` as exercise 1 or 2 would (for tests and curious learners).

    Example:
        >>> verdict_of(1, {"method": "precompiled function", "load_error": None, "errors": {},
        ...                "matches": {"8": True}, "frames": 0, "graphs": 0})[:21]
        'Exercise 1: correct: '
    """
    if exercise not in (1, 2):
        raise ValueError(f"exercise must be 1 or 2; got {exercise!r}")
    batches = (EXAMPLE_BATCH,) if exercise == 1 else ANY_BATCHES
    return _verdict(exercise, report, batches, _SHAPE_HINTS[exercise])
