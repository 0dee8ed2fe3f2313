"""Self-checks of notebook 08's exercises (the capstone: a compiled decoding step).

Exercise 1's check compiles the learner's answer (``backend="eager"``: it counts what Dynamo
does); Exercise 2's compares the learner's prediction with what the notebook measured.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from helpers.counters import CompileCounts
from helpers.exercises import check_answer


def _count(label: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{label} must be a count (an int >= 0) measured by the notebook; got {value!r}")
    return value


#: Exercise 1's requests: (prompt length, new tokens). Each needs a different room in a cache.
REQUESTS: tuple[tuple[int, int], ...] = ((16, 4), (24, 4), (8, 6), (30, 3), (12, 5))


def _cache_room(cache: Any) -> int | None:
    """Positions a static cache can hold (its smallest full-attention layer's), or None if unknown.

    transformers 4.56 and 5.x both give each ``StaticLayer`` a ``max_cache_len`` when the cache is
    built (its tensors are allocated later, at the first write). A ``DynamicCache`` grows and has
    none; a sliding-window layer wraps around instead of overflowing: both are left out.
    """
    rooms = [
        layer.max_cache_len
        for layer in getattr(cache, "layers", None) or ()
        if isinstance(getattr(layer, "max_cache_len", None), int) and not getattr(layer, "is_sliding", False)
    ]
    return min(rooms) if rooms else None


_ROOM_HINT = "Hint: the cache must have room for the prompt and the new tokens of the longest request"


def check_one_cache(
    cache_for: Callable[[int, int], Any] | None,
    *,
    model: Any,
    step: Callable[..., torch.Tensor],
    generate: Callable[..., torch.Tensor],
    requests: Sequence[tuple[int, int]] = REQUESTS,
) -> str:
    """Exercise 1: serve ``requests`` with one compiled step and the caches ``cache_for`` gives.

    ``cache_for(prompt_len, n_new)`` returns the ``StaticCache`` a request decodes in. The
    check compiles ``step`` (``backend="eager"``, ``fullgraph=True``, after a reset), runs
    ``generate(model, compiled_step, prompt, n_new, cache)`` for every request, and compares
    the tokens with the eager step in a fresh cache of the request's size. Right when every
    request runs in the first graph (no recompilation) and all share one cache, as the exercise
    asks: a cache per request has new tensors at new addresses (CUDA graphs re-record; releases
    whose ``mark_static_address`` guards by default recompile). A wrong answer raises
    ``AssertionError`` with the counts and the first guard that failed, and a hint that points
    to the answer without giving it. A cache without room for a request is rejected before the
    request runs: writing past a static cache's end is an index error on a CPU, but on a GPU a
    device-side assert that leaves the CUDA context unusable for the rest of the session.

    Example:
        >>> check_one_cache(None, model=None, step=print, generate=print)
        'Exercise 1: not answered yet.'
    """
    if cache_for is None:
        return "Exercise 1: not answered yet."
    if not callable(cache_for) or isinstance(cache_for, type):
        raise TypeError(f"cache_for must be a function (prompt_len, n_new) -> cache; got {cache_for!r}")
    for label, value in (("step", step), ("generate", generate)):
        if not callable(value):
            raise TypeError(f"{label} must be the notebook's {label} function; got {value!r}")
    if getattr(model, "config", None) is None:
        raise TypeError(f"model must be a transformers model (with a .config); got {type(model).__name__}")
    if not requests or not all(
        isinstance(n, int) and not isinstance(n, bool) and n > 0 for request in requests for n in request
    ):
        raise ValueError(f"requests must be (prompt_len, n_new) pairs of positive ints; got {requests!r}")
    from helpers.decoding import new_static_cache

    generator = torch.Generator().manual_seed(8)
    device = next(model.parameters()).device
    prompts = [
        torch.randint(model.config.vocab_size, (1, n), generator=generator).to(device) for n, _ in requests
    ]
    torch._dynamo.reset()
    compiled = torch.compile(step, backend="eager", fullgraph=True)
    caches, served = [], []
    try:
        with CompileCounts() as counts:
            for prompt, (prompt_len, n_new) in zip(prompts, requests, strict=True):
                cache = cache_for(prompt_len, n_new)
                if not callable(getattr(cache, "reset", None)):
                    raise TypeError(f"cache_for must return a cache (a StaticCache); it returned {cache!r}")
                caches.append(cache)
                room = _cache_room(cache)
                # The loop writes the prompt and every new token but the last (it is never fed back).
                if room is not None and room < prompt_len + n_new - 1:
                    raise AssertionError(
                        f"Exercise 1: the request of {prompt_len} + {n_new} tokens does not fit in the cache "
                        f"cache_for returned (room for {room} positions); the check stopped before running "
                        f"it. {_ROOM_HINT}"
                    )
                try:
                    served.append(generate(model, compiled, prompt, n_new, cache))
                except Exception as error:  # anything else the learner's cache makes fail
                    first = (str(error).strip().splitlines() or [""])[0][:120]
                    raise AssertionError(
                        f"Exercise 1: the request of {prompt_len} + {n_new} tokens failed "
                        f"({type(error).__name__}: {first}). {_ROOM_HINT}"
                    ) from None
    finally:
        torch._dynamo.reset()
    for prompt, tokens, (prompt_len, n_new) in zip(prompts, served, requests, strict=True):
        expected = generate(model, step, prompt, n_new, new_static_cache(model, prompt_len + n_new))
        if not torch.equal(tokens, expected):
            raise AssertionError(
                f"Exercise 1: the request of {prompt_len} + {n_new} tokens gave other tokens than eager. "
                "Hint: return a StaticCache; generate() resets it before each request"
            )
    n_caches = len({id(cache) for cache in caches})
    summary = (
        f"{counts.graphs} graph(s), {counts.recompilations} recompilation(s), "
        f"{n_caches} cache(s) for {len(requests)} requests"
    )
    if counts.recompilations:
        raise AssertionError(
            f"Exercise 1: {summary}; the first guard that failed: {counts.recompile_reasons[0]}. "
            "Hint: the compiled step guards the shapes of the cache's tensors (on some releases which "
            "tensors they are, too): what must stay the same from one request to the next?"
        )
    if n_caches > 1:
        raise AssertionError(
            f"Exercise 1: {summary}, and the exercise asks for one cache (a torch whose "
            "mark_static_address guards by default recompiles for each new one: section 3 prints this "
            "release's default). Hint: the requests differ in length; which size serves them all?"
        )
    return f"Exercise 1: correct: {summary}."


#: Words in a graph-break reason that say Dynamo met a tensor's value (torch 2.8 to 2.15 spell it
#: `bool` on a tensor, `Tensor.item()`, a "generic_jump" on a tensor, or "data-dependent").
_VALUE_BREAK_WORDS = ("item()", "operator `bool`", "generic_jump", "data-dependent", "data dependent")


def check_stop_in_step(prediction: int | None, break_reasons: Sequence[object]) -> str:
    """Exercise 2: graph breaks of a decoding step that checks for the end-of-text token itself.

    ``break_reasons`` is ``torch._dynamo.explain(step)(...).break_reasons`` for the learner's
    step (records with a ``.reason``, or their text). The prediction is how many there are.
    (Not explain's ``graph_break_count``: that is ``graph_count - 1``, and a break at the end
    of a step leaves no second graph, so it reads 0 here.) A step with no break, or whose only
    breaks are not on a tensor's value (a ``print``), is rejected whatever the prediction.

    Example:
        >>> check_stop_in_step(None, ["Data-dependent branching"])
        'Exercise 2: not answered yet.'
        >>> check_stop_in_step(1, ["Data-dependent branching"])
        'Exercise 2: correct.'
    """
    if isinstance(break_reasons, (str, bytes)) or not isinstance(break_reasons, Sequence):
        raise TypeError(
            "break_reasons must be the list explain returned (explanation.break_reasons); "
            f"got {type(break_reasons).__name__}"
        )
    texts = [str(getattr(reason, "reason", reason)) for reason in break_reasons]
    if prediction is None:
        return "Exercise 2: not answered yet."
    _count("prediction", prediction)
    if not texts:
        raise AssertionError(
            "Exercise 2: your step compiled as one graph, so it does not look at a token's value in "
            "Python yet. Hint: branch on `bool((next_token == EOS).all())` inside the step."
        )
    if not any(word in text.lower() for text in texts for word in _VALUE_BREAK_WORDS):
        first = texts[0].strip().splitlines()[0] if texts[0].strip() else "?"
        raise AssertionError(
            f"Exercise 2: your step breaks the graph ({first}), but not on a token's value. "
            "Hint: branch on `bool((next_token == EOS).all())` inside the step."
        )
    return check_answer(
        2,
        prediction,
        len(texts),
        hint="count explanation.break_reasons: Dynamo cannot know a tensor's value while tracing, "
        "so a Python branch on it cuts the graph",
    )
