"""Self-checks for notebook 04's exercises: each compiles the learner's answer and reads a fact.

All three compile with ``backend="eager"`` (exercises 1 and 3 through a copy that also counts the
calls that ran a compiled graph): they count what Dynamo does (graphs, guards, recompilations),
which needs no code generation.
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

#: Exercise 2's longest request: the notebook draws ``REQUEST_LENGTHS`` up to this many tokens.
MAX_REQUEST_LENGTH: int = 256


class _CountingEager:
    """A backend that runs each graph as ``backend="eager"`` does and counts what it did.

    ``compiles`` counts the graphs handed to it, ``runs`` the calls that ran one of them. A call
    that runs eagerly (past the recompile limit, under a ``force_eager`` or ``eager_on_recompile``
    stance) adds no run: only ``runs`` tells a skipped compilation from an avoided one.
    """

    def __init__(self) -> None:
        self.compiles = 0
        self.runs = 0

    def __call__(self, graph_module: torch.fx.GraphModule, example_inputs: Any) -> Callable[..., Any]:
        self.compiles += 1

        def run(*args: Any) -> Any:
            self.runs += 1
            return graph_module.forward(*args)

        return run


def _kept_recompile_limit() -> Any:
    """A ``config.patch`` that puts the recompile limit back as it is now, whatever an answer sets."""
    limit = "recompile_limit" if hasattr(torch._dynamo.config, "recompile_limit") else "cache_size_limit"
    return torch._dynamo.config.patch({limit: getattr(torch._dynamo.config, limit)})


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
    backend = _CountingEager()  # backend.runs: the calls that ran a compiled graph (not eagerly)
    torch._dynamo.reset()
    compiled = torch.compile(_attention, backend=backend)
    # A prepare that lowers the recompile limit or sets a stance changes the process: undone below.
    try:
        with _kept_recompile_limit(), CompileCounts() as observed:
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
    assert backend.runs == len(DECODE_LENGTHS), (
        f"Exercise 1: the compiled graph ran for {backend.runs} of the {len(DECODE_LENGTHS)} lengths; "
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
    max_length: int = MAX_REQUEST_LENGTH,
) -> str:
    """Exercise 2: warm up every bucket with ``dynamic=False``, serve the padded lengths, count graphs.

    ``lengths`` is a sample of the requests, each at most ``max_length`` tokens. Right when the
    largest bucket holds ``max_length`` tokens (any request fits, not only the sampled ones),
    Dynamo compiles at most ``max_graphs`` graphs for the warm-up and the padded sample (a spare
    bucket no request uses still costs one), and the padded tokens are at most ``max_padding``
    times the real ones. A wrong answer raises ``AssertionError`` saying which condition failed.

    Example:
        >>> check_buckets(None, [5, 70])
        'Exercise 2: not answered yet.'
        >>> check_buckets((8, 80), [5, 6, 70], max_padding=1.5, max_length=80)
        'Exercise 2: correct, 2 graphs for 3 requests, 1.19x the real tokens.'
    """
    if buckets is None:
        return "Exercise 2: not answered yet."
    if isinstance(buckets, (str, bytes)) or not isinstance(buckets, Sequence) or not buckets:
        raise TypeError(f"buckets must be a tuple of bucket lengths, e.g. (64, 256); got {buckets!r}")
    if not all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in buckets):
        raise ValueError(f"buckets must hold positive whole numbers of tokens; got {buckets!r}")
    if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1:
        raise ValueError(f"max_length must be a positive whole number of tokens; got {max_length!r}")
    if not lengths or not all(isinstance(n, int) and 0 < n <= max_length for n in lengths):
        raise ValueError(
            f"lengths must be a non-empty list of request lengths from 1 to max_length ({max_length})"
        )
    ordered = sorted(set(buckets))
    longest = max(lengths)
    assert longest <= ordered[-1], (
        f"Exercise 2: the longest request ({longest} tokens) does not fit the largest bucket "
        f"({ordered[-1]}). Hint: the last bucket must hold every request"
    )
    shortest_left_out = ordered[-1] + 1
    uncovered = f"{shortest_left_out}" + ("" if shortest_left_out >= max_length else f" to {max_length}")
    assert ordered[-1] >= max_length, (
        f"Exercise 2: the largest of buckets must be {max_length} or more (requests have up to "
        f"{max_length} tokens); {ordered[-1]} leaves a request of {uncovered} tokens without a "
        "bucket. Hint: fit the last bucket to the longest request allowed, not the longest one drawn"
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
    trivially), no temperature recompiles under ``set_stance("fail_on_recompile")``, every call
    after the warm-up runs the warm-up's graph (not eagerly: a stance such as ``force_eager`` or
    ``eager_on_recompile``, or a lower recompile limit, skips recompiling, it does not avoid it),
    and every result matches ``softmax(logits / temperature)``. The check puts the default stance
    and the recompile limit back, whatever the answer set.

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
    backend = _CountingEager()  # counts the graphs compiled and the calls that ran one
    logits = torch.randn(4, 10, generator=torch.Generator().manual_seed(0))
    # An answer that sets a stance or lowers the recompile limit changes the process: undone below.
    try:
        with _kept_recompile_limit():
            sampler = sampler_class()
            compiled = torch.compile(sampler, backend=backend)
            with CompileCounts() as warmup:
                compiled(logits)
            assert warmup.frames >= 1 and warmup.graphs >= 1 and backend.runs >= 1, (
                "Exercise 3: the warm-up compiled no graph, so the tripwire had nothing to watch. "
                "Hint: the forward must stay compiled (no torch.compiler.disable, no stance)"
            )
            assert warmup.graph_breaks == 0, (
                f"Exercise 3: the warm-up hit {warmup.graph_breaks} graph break(s), so part of the "
                "forward runs outside the graph. Hint: keep the whole forward in the graph "
                "(no .item(), float() or disabled helper)"
            )
            compiles = backend.compiles
            with torch.compiler.set_stance("fail_on_recompile"):
                for temperature in (0.7, 1.3, 2.0):
                    sampler.set_temperature(temperature)
                    expected = torch.softmax(logits / temperature, dim=-1)
                    runs = backend.runs
                    out = compiled(logits)
                    try:
                        torch.testing.assert_close(out, expected)
                    except AssertionError:
                        raise AssertionError(
                            f"Exercise 3: at temperature {temperature} the result is not "
                            "softmax(logits / temperature). Hint: set_temperature must still take effect"
                        ) from None
                    assert backend.compiles == compiles, (
                        f"Exercise 3: at temperature {temperature} Dynamo compiled a new graph "
                        "(a new temperature recompiled, or the cache was reset). Hint: a Python number "
                        "is guarded by its value; section 2's last table shows what is not"
                    )
                    assert backend.runs > runs, (
                        f"Exercise 3: at temperature {temperature} the forward ran eagerly, not the "
                        "compiled graph: a stance (force_eager, eager_on_recompile) or a lower "
                        "recompile limit skips recompiling, it does not avoid it. Hint: make the "
                        "warm-up's graph accept every temperature"
                    )
    except RuntimeError as error:
        if "fail_on_recompile" not in str(error):
            raise
        raise AssertionError(
            "Exercise 3: a new temperature recompiled. Hint: a Python number is guarded by its value; "
            "section 2's last table shows what is not"
        ) from None
    finally:
        torch.compiler.set_stance("default")
        torch._dynamo.reset()
    return "Exercise 3: correct: one graph, no recompilation for any temperature."
