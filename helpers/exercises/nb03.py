"""Self-checks for notebook 03's exercises: each compiles the learner's answer and reads a fact.

All three compile with ``backend="eager"``: they count what Dynamo does (graphs, graph breaks),
which needs no code generation.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from helpers.counters import CompileCounts
from helpers.exercises import check_answer


def _quiet() -> contextlib.redirect_stdout:
    """Keep the debugging prints of the learner's code out of the check's output."""
    return contextlib.redirect_stdout(io.StringIO())


def _breaks(fn: Callable[..., Any], *args: Any) -> int:
    """Graph breaks while the default ``torch.compile`` runs ``fn`` once (prints kept quiet)."""
    torch._dynamo.reset()
    try:
        with _quiet(), CompileCounts() as counts:
            torch.compile(fn, backend="eager")(*args)
    finally:
        torch._dynamo.reset()
    return counts.graph_breaks


def _one_graph(fn: Callable[..., Any], *args: Any) -> tuple[int, int, str]:
    """(graphs, graph breaks, fullgraph error or "") when ``fn`` compiles with ``fullgraph=True``."""
    torch._dynamo.reset()
    error = ""
    try:
        with _quiet(), CompileCounts() as counts:
            torch.compile(fn, backend="eager", fullgraph=True)(*args)
    except torch._dynamo.exc.TorchDynamoException as raised:  # Unsupported, or UserError (2.13)
        error = str(raised).strip().splitlines()[0]
    finally:
        torch._dynamo.reset()
    return counts.graphs, counts.graph_breaks, error


def check_break_hunt(
    counted: Mapping[str, int | None],
    functions: Sequence[Callable[[torch.Tensor], Any]],
    fixed: Callable[[torch.Tensor], torch.Tensor],
) -> str:
    """Exercise 1: the graph breaks counted for each function, and a fix of the last one.

    ``counted`` maps each function's name to the graph breaks the learner counted when compiling
    it (``CompileCounts``, ``backend="eager"``, a (3, 4) input); all ``None`` means not answered
    yet. The check counts them the same way. ``fixed`` must compute what the last function does,
    on a (3, 4) and a (2, 5) input, and compile as one graph with ``fullgraph=True``.

    Example:
        >>> def doubled(x):
        ...     return x * 2
        >>> check_break_hunt({"doubled": None}, [doubled], doubled)
        'Exercise 1: not answered yet.'
    """
    if not isinstance(counted, Mapping):
        raise TypeError(f"counted must be a dict of function name -> graph breaks; got {counted!r}")
    if isinstance(functions, (str, bytes)) or not isinstance(functions, Sequence) or not functions:
        raise TypeError("functions must be a non-empty list of the exercise's functions")
    if not all(callable(fn) for fn in functions):
        raise TypeError("functions must hold only functions")
    if not callable(fixed):
        raise TypeError(f"fixed must be a function of x; got {fixed!r}")
    names = [getattr(fn, "__name__", None) for fn in functions]
    unknown = sorted(set(counted) - set(names))
    if unknown:
        raise ValueError(f"counted names functions that are not in the exercise: {unknown}")
    bad = {
        k: v for k, v in counted.items() if v is not None and (not isinstance(v, int) or isinstance(v, bool))
    }
    if bad:
        raise TypeError(f"counted must hold whole numbers of graph breaks (or None); got {bad}")
    answers = {name: counted.get(name) for name in names}
    if all(value is None for value in answers.values()):
        return "Exercise 1: not answered yet."
    matrix = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    actual = {name: _breaks(fn, matrix) for name, fn in zip(names, functions, strict=True)}
    check_answer(
        1,
        answers,
        actual,
        hint="count graph breaks (not graphs) with CompileCounts around the first compiled call; "
        "Python needs a tensor's values for some lines, only what is known while tracing for others",
    )
    original, name = functions[-1], names[-1]
    samples = [matrix, torch.randn(2, 5, generator=torch.Generator().manual_seed(1))]
    for sample in samples:
        with _quiet():
            got, want = fixed(sample), original(sample)
        if not (isinstance(got, torch.Tensor) and got.shape == want.shape and torch.allclose(got, want)):
            raise AssertionError(
                f"Exercise 1: the counts are right, but the fix computes something else than {name} on a "
                f"{tuple(sample.shape)} input. Hint: keep the maths, drop only the trip through Python."
            )
    graphs, breaks, error = _one_graph(fixed, matrix)
    if error or graphs != 1 or breaks:
        verdict = f"raises: {error}" if error else f"gives {graphs} graph(s) and {breaks} break(s)"
        raise AssertionError(
            f"Exercise 1: the counts are right, but the fix under fullgraph=True {verdict}. Hint: "
            "stay in tensors; torch.compiler.disable compiles nothing"
        )
    # fullgraph=True also captures .item() from torch 2.10 (capture_scalar_outputs): a fix that keeps a
    # trip through Python numbers passes there, and still breaks under the default compile.
    default_breaks = _breaks(fixed, matrix)
    if default_breaks:
        raise AssertionError(
            f"Exercise 1: the fix compiles under fullgraph=True, but the default compile still breaks "
            f"{default_breaks} time(s): it keeps a trip through Python numbers. Hint: stay in tensors"
        )
    breaks_text = ", ".join(f"{n}: {b}" for n, b in actual.items())
    return f"Exercise 1: correct ({breaks_text}); the fix compiles as one graph."


class LeakyModel(nn.Module):
    """Exercise 2's model: two graph breaks, a debugging print and a data-dependent rescale."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16, bias=False)
        self.out = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        print("debug: projected")  # break 1
        peak = h.abs().max()
        if peak > 10:  # break 2: rescale so that the largest value is 10
            h = h / peak * 10
        return self.out(torch.relu(h))


def _exercise_2_samples() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(2)
    ordinary = torch.randn(8, 16, generator=generator)
    return {
        "an ordinary batch": ordinary,
        "a large batch (it takes the rescaling branch)": 100 * torch.randn(8, 16, generator=generator),
        "an all-zero (padding) batch": torch.zeros(8, 16),
    }


def _first_difference(
    run: Callable[[torch.Tensor], torch.Tensor], model: nn.Module, reference: nn.Module
) -> str | None:
    """How ``run`` (``model`` itself or compiled) differs from ``reference`` on exercise 2's batches.

    Compares the outputs and the weight gradients of ``sum(output)`` on every batch; returns
    ``None`` when all agree, else a sentence fragment naming the batch.
    """
    samples = _exercise_2_samples()
    # Just either side of the rescaling threshold (a peak of 10): the projection is linear, so
    # scaling the ordinary batch scales its peak. A threshold below 9.99 rescales the first and one
    # at or above 10.01 leaves the second alone, so each differs from LeakyModel on one of them.
    with torch.no_grad():
        peak = reference.proj(samples["an ordinary batch"]).abs().max()
    for target in (9.99, 10.01):
        samples[f"a batch whose peak is {target:g}"] = samples["an ordinary batch"] * (target / peak)
    for name, sample in samples.items():
        results = {}
        with _quiet():
            for label, module, call in (("reference", reference, reference), ("candidate", model, run)):
                module.zero_grad()
                output = call(sample)
                output.sum().backward()
                results[label] = (output.detach(), [p.grad.clone() for p in module.parameters()])
        (got, got_grads), (expected, expected_grads) = results["candidate"], results["reference"]
        if not torch.allclose(got, expected, rtol=1e-5, atol=1e-5):
            return f"on {name} it computes something else than LeakyModel"
        for got_grad, expected_grad in zip(got_grads, expected_grads, strict=True):
            if not bool(torch.isfinite(got_grad).all()):
                return f"on {name} its gradients are NaN"
            if not torch.allclose(got_grad, expected_grad, rtol=1e-5, atol=1e-5):
                return f"on {name} its gradients are not LeakyModel's"
    return None


def check_fixed_model(model_class: type[nn.Module] | None) -> str:
    """Exercise 2: ``model_class`` must compute what ``LeakyModel`` does, as one graph with no break.

    The check gives the candidate ``LeakyModel``'s weights and compares its outputs and weight
    gradients on an ordinary, a large (rescaled) and an all-zero batch (where the peak is 0), and on
    two batches whose peaks lie just either side of 10, in eager mode. Then it compiles it with the
    default ``torch.compile`` (``backend="eager"``) and asserts one graph and no graph break,
    counted by ``CompileCounts`` (a break before the first tensor operation counts too), that
    ``fullgraph=True`` compiles it, and that the compiled model gives the same outputs and gradients
    (so ``torch.compiler.is_compiling()`` may hide the print, not the maths).

    Example:
        >>> check_fixed_model(None)
        'Exercise 2: not answered yet.'
    """
    if model_class is None:
        return "Exercise 2: not answered yet."
    if not (isinstance(model_class, type) and issubclass(model_class, nn.Module)):
        raise TypeError(f"model_class must be an nn.Module class (not an instance); got {model_class!r}")
    torch.manual_seed(0)
    reference = LeakyModel().eval()
    candidate = model_class().eval()
    candidate.load_state_dict(reference.state_dict())
    compiled_difference = None
    eager_difference = _first_difference(candidate, candidate, reference)
    if eager_difference and "NaN" in eager_difference:
        raise AssertionError(
            f"Exercise 2: {eager_difference}. Hint: torch.where computes both sides, and the side not "
            "taken still takes part in the backward (5.1)"
        )
    if eager_difference:
        raise AssertionError(
            f"Exercise 2: {eager_difference}. Hint: keep the rescaling's maths (h / peak * 10 when "
            "peak > 10), only without a Python `if`"
        )
    ordinary = _exercise_2_samples()["an ordinary batch"]
    torch._dynamo.reset()
    try:
        with _quiet(), torch.no_grad(), CompileCounts() as counts:
            torch.compile(candidate, backend="eager")(ordinary)
        torch._dynamo.reset()
        try:
            strict = torch.compile(candidate, backend="eager", fullgraph=True)
            with _quiet(), torch.no_grad():
                strict(ordinary)
            compiled_difference = _first_difference(strict, candidate, reference)
            fullgraph_error = ""
        except torch._dynamo.exc.TorchDynamoException as error:  # Unsupported, or UserError (2.13)
            fullgraph_error = str(error).strip().splitlines()[0]
    finally:
        torch._dynamo.reset()
    if counts.graphs == 0:
        raise AssertionError(
            "Exercise 2: compiling FixedModel made no graph. Hint: the forward must stay compiled "
            "(no torch.compiler.disable)"
        )
    if counts.graph_breaks or counts.graphs != 1 or fullgraph_error:
        verdict = f"raises: {fullgraph_error}" if fullgraph_error else "compiles"
        raise AssertionError(
            f"Exercise 2: {counts.graphs} graphs and {counts.graph_breaks} graph break(s) under the "
            f"default compile; fullgraph=True {verdict}. Hint: the table in 5.6"
        )
    if compiled_difference:
        raise AssertionError(
            f"Exercise 2: one graph, but compiled, {compiled_difference}. Hint: "
            "torch.compiler.is_compiling() may hide the print, not the rescaling"
        )
    return "Exercise 2: correct: one graph, no break, the same results and gradients as LeakyModel."


def signed_step(x: torch.Tensor) -> torch.Tensor:
    """Exercise 3's function: a branch on the sign of a sum (a graph break)."""
    if x.sum() > 0:
        return x.cos() + 1
    return x.sin() - 1


def _captures_cond(fn: Callable[[torch.Tensor], torch.Tensor], sample: torch.Tensor) -> bool:
    graphs: list[torch.fx.GraphModule] = []

    def keep(graph_module: torch.fx.GraphModule, example_inputs: Any) -> Callable[..., Any]:
        graphs.append(graph_module)
        return graph_module.forward

    torch._dynamo.reset()
    try:
        torch.compile(fn, backend=keep, fullgraph=True)(sample)
    finally:
        torch._dynamo.reset()
    cond = torch.ops.higher_order.cond
    return any(node.target is cond for gm in graphs for node in gm.graph.nodes)


def check_signed_step(candidate: Callable[[torch.Tensor], torch.Tensor] | None) -> str:
    """Exercise 3: ``candidate`` is ``signed_step`` with ``torch.cond``: one graph under ``fullgraph=True``.

    The check compiles ``candidate`` with ``fullgraph=True`` (``backend="eager"``), compares it with
    ``signed_step`` on a positive, a negative and mixed-sign inputs (the sum's sign decides; one
    sums to exactly 0), and asserts that the captured graph holds a ``torch.cond``.

    Example:
        >>> check_signed_step(None)
        'Exercise 3: not answered yet.'
    """
    if candidate is None:
        return "Exercise 3: not answered yet."
    if not callable(candidate):
        raise TypeError(f"candidate must be a function like signed_step; got {candidate!r}")
    generator = torch.Generator().manual_seed(3)
    positive = torch.rand(5, generator=generator) + 0.1
    negative = -torch.rand(5, generator=generator) - 0.1
    # Mixed signs: the sum's sign is neither the first element's nor what max/min/any/all say.
    samples = {
        "a positive input": positive,
        "a negative input": negative,
        "an input of mixed signs with a positive sum": torch.tensor([-0.5, 1.0, 1.0, -0.2, 0.3]),
        "an input of mixed signs with a negative sum": torch.tensor([0.5, -1.0, -1.0, 0.2, -0.3]),
        # Most elements and the median negative, the sum positive (and the other way round).
        "an input with more negatives and a positive sum": torch.tensor([3.0, -1.0, -1.0, -0.5, 0.2]),
        "an input with more positives and a negative sum": torch.tensor([-3.0, 1.0, 1.0, 0.5, -0.2]),
        # The predicate's boundary: a sum of exactly 0 (each value and partial sum is exact in float32).
        "an input of mixed signs whose sum is 0": torch.tensor([0.5, -1.0, 0.25, 0.75, -0.5]),
    }
    torch._dynamo.reset()
    compiled = torch.compile(candidate, backend="eager", fullgraph=True)
    try:
        results = {name: compiled(sample) for name, sample in samples.items()}
    except torch._dynamo.exc.TorchDynamoException as error:  # Unsupported, or UserError (2.13)
        raise AssertionError(
            f"Exercise 3: fullgraph=True raises ({str(error).strip().splitlines()[0]}). "
            "Hint: torch.cond(pred, true_fn, false_fn, (x,))"
        ) from None
    finally:
        torch._dynamo.reset()
    for name, sample in samples.items():
        try:
            torch.testing.assert_close(results[name], signed_step(sample), rtol=1e-6, atol=1e-6)
        except AssertionError:
            raise AssertionError(
                f"Exercise 3: compiles, but on {name} the result differs from signed_step. "
                "Hint: the predicate is the sign of the sum, and true_fn runs when it holds"
            ) from None
    if not _captures_cond(candidate, positive):
        raise AssertionError(
            "Exercise 3: one graph and the right results, but the graph holds no torch.cond (torch.where "
            "computes both sides). Hint: this exercise practises torch.cond"
        )
    return "Exercise 3: correct: one graph under fullgraph=True, a torch.cond inside, both branches right."
