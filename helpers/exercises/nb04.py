"""Self-checks for notebook 04's exercises: each compiles the learner's answer and reads a fact.

All three compile with ``backend="eager"``: they count what Dynamo does (graphs, guards,
recompilations), which needs no code generation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from helpers.counters import CompileCounts


def _attention(x: torch.Tensor) -> torch.Tensor:
    scores = x @ x.transpose(-1, -2)
    future = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(diagonal=1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ x


#: Exercise 1's decode loop: the sequence grows from one token.
DECODE_LENGTHS: tuple[int, ...] = (1, 2, 3, 5, 8, 13)


def check_decode_graphs(prepare: Callable[[torch.Tensor], torch.Tensor | None] | None) -> str:
    """Exercise 1: compile causal attention and feed it ``DECODE_LENGTHS``, each input prepared.

    ``prepare(x)`` gets each ``(2, length, 4)`` input before the call and returns the tensor to
    feed the compiled function (``None`` means: ``x`` itself, marked in place). It may mark ``x``
    or pad it after the last token. Right when the loop compiles exactly one graph, with no graph
    break, and the first ``length`` rows of every result match eager. A wrong answer raises
    ``AssertionError`` with the graph count and the first guard that failed.

    Example:
        >>> check_decode_graphs(None)
        'Exercise 1: not answered yet.'
        >>> from torch._dynamo.decorators import mark_unbacked
        >>> check_decode_graphs(lambda x: mark_unbacked(x, 1))
        'Exercise 1: correct: 1 graph for lengths 1, 2, 3, 5, 8, 13.'
    """
    if prepare is None:
        return "Exercise 1: not answered yet."
    if not callable(prepare) or isinstance(prepare, type):
        raise TypeError(f"prepare must be a function taking and returning a tensor; got {prepare!r}")
    lengths = ", ".join(map(str, DECODE_LENGTHS))
    generator = torch.Generator().manual_seed(1)
    graph_calls = []  # one entry per call that ran a compiled graph (not eagerly)

    def counting_eager(graph_module: torch.fx.GraphModule, example_inputs: Any) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            graph_calls.append(1)
            return graph_module.forward(*args)

        return run

    torch._dynamo.reset()
    compiled = torch.compile(_attention, backend=counting_eager)
    # A prepare that lowers the recompile limit or sets a stance changes the process: undone below.
    limit = "recompile_limit" if hasattr(torch._dynamo.config, "recompile_limit") else "cache_size_limit"
    kept_limit = torch._dynamo.config.patch({limit: getattr(torch._dynamo.config, limit)})
    try:
        with kept_limit, CompileCounts() as observed:
            for length in DECODE_LENGTHS:
                x = torch.randn(2, length, 4, generator=generator)
                expected = _attention(x)
                fed = prepare(x)
                fed = x if fed is None else fed
                if not isinstance(fed, torch.Tensor):
                    raise TypeError(f"prepare must return a tensor or None; it returned {fed!r}")
                try:
                    out = compiled(fed)
                except Exception as error:  # e.g. a size marked dynamic that the code specialized
                    first = (str(error).strip().splitlines() or [""])[0][:160]
                    raise AssertionError(
                        f"Exercise 1: compiling length {length} failed ({type(error).__name__}: {first}). "
                        "Hint: pick a marking that accepts every length of the loop"
                    ) from None
                try:
                    torch.testing.assert_close(out[:, :length], expected)
                except (AssertionError, IndexError, RuntimeError):
                    raise AssertionError(
                        f"Exercise 1: at length {length} the first {length} rows differ from eager. "
                        "Hint: prepare may mark or pad x, not change its values"
                    ) from None
    finally:
        torch.compiler.set_stance("default")
        torch._dynamo.reset()
    assert len(graph_calls) == len(DECODE_LENGTHS), (
        f"Exercise 1: the compiled graph ran for {len(graph_calls)} of the {len(DECODE_LENGTHS)} lengths; "
        "the others ran eagerly (a recompile limit or a stance skips compiling, it does not avoid it). "
        "Hint: pick a marking that makes one graph accept every length"
    )
    reason = (
        f"; the first guard that failed: {observed.recompile_reasons[0]}"
        if observed.recompile_reasons
        else ""
    )
    assert observed.frames == 1 and observed.graph_breaks == 0, (
        f"Exercise 1: {observed.frames} graphs and {observed.graph_breaks} graph breaks for lengths "
        f"{lengths}{reason}. Hint: a symbolic size is assumed to be at least 2; which marking gives "
        "the size no example value?"
    )
    return f"Exercise 1: correct: 1 graph for lengths {lengths}."


def check_buckets(
    buckets: Sequence[int] | None,
    lengths: Sequence[int],
    *,
    max_graphs: int = 3,
    max_padding: float = 1.35,
) -> str:
    """Exercise 2: warm up every bucket with ``dynamic=False``, serve the padded lengths, count graphs.

    Right when every request fits the largest bucket, Dynamo compiles at most ``max_graphs``
    graphs for the warm-up and the padded stream (a spare bucket no request uses still costs one),
    and the padded tokens are at most ``max_padding`` times the real ones. A wrong answer raises
    ``AssertionError`` saying which condition failed.

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
    with torch._dynamo.config.patch(recompile_limit=len(ordered) + 1), CompileCounts() as observed:
        for bucket in ordered:  # the warm-up compiles every bucket, used or not
            compiled(torch.randn(1, bucket, 4))
        for length in padded:
            compiled(torch.randn(1, length, 4))
    torch._dynamo.reset()
    assert observed.frames <= max_graphs, (
        f"Exercise 2: {observed.frames} graphs compiled; at most {max_graphs} allowed. "
        "Hint: with dynamic=False every bucket is one graph, compiled in the warm-up"
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
            "Exercise 3: a new temperature recompiled. Hint: a Python number is guarded by its value; "
            "keep the temperature in a tensor (a buffer) and update it in place"
        ) from None
    finally:
        torch._dynamo.reset()
    return "Exercise 3: correct: one graph, no recompilation for any temperature."
