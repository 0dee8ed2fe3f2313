"""Self-checks for notebook 04's exercises: each compiles the learner's answer and reads a fact.

All three compile with ``backend="eager"``: they count what Dynamo does (graphs, guards,
recompilations), which needs no code generation.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from helpers.counters import CompileCounts
from helpers.exercises import check_answer

#: Exercise 1's calls, in order: (shape, dtype) of each input.
PREDICTION_CALLS: tuple[tuple[tuple[int, int], torch.dtype], ...] = (
    ((4, 8), torch.float32),
    ((4, 8), torch.float32),
    ((6, 8), torch.float32),
    ((9, 8), torch.float32),
    ((9, 8), torch.float64),
    ((1, 8), torch.float32),
)


def check_graph_prediction(prediction: int | None) -> str:
    """Exercise 1: compile ``tanh(x) * 2`` and feed it ``PREDICTION_CALLS``; compare the graph count.

    ``prediction`` is the number of graphs Dynamo compiles (default settings, fresh cache).

    Example:
        >>> check_graph_prediction(None)
        'Exercise 1: not answered yet.'
    """
    if prediction is not None and (not isinstance(prediction, int) or isinstance(prediction, bool)):
        raise TypeError(f"prediction must be a whole number of graphs; got {type(prediction).__name__}")
    if prediction is None:
        return check_answer(1, None, 0, hint="unused")
    torch._dynamo.reset()
    doubled_tanh = torch.compile(lambda x: torch.tanh(x) * 2, backend="eager")
    with CompileCounts() as observed:
        for shape, dtype in PREDICTION_CALLS:
            doubled_tanh(torch.randn(*shape, dtype=dtype))
    torch._dynamo.reset()
    return check_answer(
        1,
        prediction,
        observed.frames,
        hint=(
            "the first graph is static; a call compiles only if it fails a guard of every graph "
            "cached so far. Remember the dtype guard, and what is special about size 1"
        ),
    )


def _attention(x: torch.Tensor) -> torch.Tensor:
    scores = x @ x.transpose(-1, -2)
    future = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(diagonal=1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ x


def check_buckets(
    buckets: Sequence[int] | None,
    lengths: Sequence[int],
    *,
    max_graphs: int = 3,
    max_padding: float = 1.35,
) -> str:
    """Exercise 2: pad every length to its bucket, compile with ``dynamic=False``, count graphs.

    Right when every request fits the largest bucket, Dynamo compiles at most ``max_graphs``
    graphs for the padded stream, and the padded tokens are at most ``max_padding`` times the
    real ones. A wrong answer raises ``AssertionError`` saying which condition failed.

    Example:
        >>> check_buckets(None, [5, 70])
        'Exercise 2: not answered yet.'
        >>> check_buckets((8, 80), [5, 6, 70], max_padding=1.5)
        'Exercise 2: correct, 2 graphs for 3 requests, 1.19x the real tokens.'
    """
    if buckets is None:
        return "Exercise 2: not answered yet."
    if isinstance(buckets, (str, bytes)) or not isinstance(buckets, Sequence) or not buckets:
        raise TypeError(f"buckets must be a tuple of bucket lengths, e.g. (64, 256); got {buckets!r}")
    if not all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in buckets):
        raise ValueError(f"buckets must hold positive whole numbers of tokens; got {buckets!r}")
    if not lengths or not all(isinstance(n, int) and n > 0 for n in lengths):
        raise ValueError("lengths must be a non-empty list of positive request lengths")
    ordered = sorted(set(buckets))
    longest = max(lengths)
    assert longest <= ordered[-1], (
        f"Exercise 2: the longest request ({longest} tokens) does not fit the largest bucket "
        f"({ordered[-1]}). Hint: the last bucket must hold every request"
    )
    padded = [next(b for b in ordered if b >= n) for n in lengths]
    cost = sum(padded) / sum(lengths)
    torch._dynamo.reset()
    compiled = torch.compile(_attention, backend="eager", dynamic=False)
    with torch._dynamo.config.patch(recompile_limit=len(lengths) + 1), CompileCounts() as observed:
        for length in padded:
            compiled(torch.randn(1, length, 4))
    torch._dynamo.reset()
    assert observed.frames <= max_graphs, (
        f"Exercise 2: {observed.frames} graphs compiled; at most {max_graphs} allowed. "
        "Hint: with dynamic=False every bucket a request lands in is one graph"
    )
    assert cost <= max_padding, (
        f"Exercise 2: padding makes {cost:.2f}x the real tokens; at most {max_padding}x allowed. "
        "Hint: put the bucket edges just above where the lengths cluster"
    )
    return (
        f"Exercise 2: correct, {observed.frames} graphs for {len(lengths)} requests, "
        f"{cost:.2f}x the real tokens."
    )


def check_sampler(sampler_class: type[torch.nn.Module] | None) -> str:
    """Exercise 3: warm the compiled sampler up once, then change the temperature under the tripwire.

    Right when the warm-up compiled the softmax into a graph (at least one graph, no graph break:
    a ``torch.compiler.disable``\\ d forward compiles nothing and would pass the tripwire
    trivially), no temperature recompiles under ``set_stance("fail_on_recompile")``, and every
    result matches ``softmax(logits / temperature)``.

    Example:
        >>> check_sampler(None)
        'Exercise 3: not answered yet.'
    """
    if sampler_class is None:
        return "Exercise 3: not answered yet."
    if not (isinstance(sampler_class, type) and issubclass(sampler_class, torch.nn.Module)):
        raise TypeError(f"sampler_class must be an nn.Module class (not an instance); got {sampler_class!r}")
    if not callable(getattr(sampler_class, "set_temperature", None)):
        raise TypeError("sampler_class must keep the set_temperature(value) method")
    torch._dynamo.reset()
    sampler = sampler_class()
    compiled = torch.compile(sampler, backend="eager")
    logits = torch.randn(4, 10, generator=torch.Generator().manual_seed(0))
    with CompileCounts() as warmup:
        compiled(logits)
    assert warmup.frames >= 1 and warmup.graphs >= 1, (
        "Exercise 3: the warm-up compiled no graph, so the tripwire had nothing to watch. Hint: "
        "the forward must stay compiled (no torch.compiler.disable)"
    )
    assert warmup.graph_breaks == 0, (
        f"Exercise 3: the warm-up hit {warmup.graph_breaks} graph break(s), so part of the forward "
        "runs outside the graph. Hint: keep the temperature a tensor inside the graph (no .item(), "
        "float() or disabled helper)"
    )
    try:
        with torch.compiler.set_stance("fail_on_recompile"):
            for temperature in (0.7, 1.3, 2.0):
                sampler.set_temperature(temperature)
                expected = torch.softmax(logits / temperature, dim=-1)
                try:
                    torch.testing.assert_close(compiled(logits), expected)
                except AssertionError:
                    raise AssertionError(
                        f"Exercise 3: at temperature {temperature} the result is not "
                        "softmax(logits / temperature). Hint: set_temperature must still take effect"
                    ) from None
    except RuntimeError as error:
        if "fail_on_recompile" not in str(error):
            raise
        raise AssertionError(
            "Exercise 3: a new temperature recompiled. Hint: a Python number is a constant in the "
            "graph; keep the temperature in a tensor (a buffer) and update it in place"
        ) from None
    finally:
        torch._dynamo.reset()
    return "Exercise 3: correct: one graph, no recompilation for any temperature."
