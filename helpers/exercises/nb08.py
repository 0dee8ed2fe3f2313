"""Self-checks of notebook 08's exercises (the capstone: a compiled decoding step).

Each check compares the learner's answer with what the notebook measured (passed in), so the
checks are fast to test with realistic wrong answers.
"""

from __future__ import annotations

from helpers.exercises import check_answer


def _count(label: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{label} must be a count (an int >= 0) measured by the notebook; got {value!r}")
    return value


def check_new_cache_recompilations(prediction: int | None, observed: int, *, address_guarded: bool) -> str:
    """Exercise 1: recompilations of a compiled step serving requests with a new ``StaticCache`` each.

    ``observed`` is the count the notebook measured (``CompileCounts.recompilations``) and
    ``address_guarded`` the installed ``mark_static_address`` default (``guard=True`` makes
    every new cache fail a guard). The prediction must equal what was measured.

    Example:
        >>> check_new_cache_recompilations(None, 1, address_guarded=False)
        'Exercise 1: not answered yet.'
        >>> check_new_cache_recompilations(1, 1, address_guarded=False)
        'Exercise 1: correct.'
    """
    observed = _count("observed", observed)
    if not isinstance(address_guarded, bool):
        raise TypeError(f"address_guarded must be a bool; got {type(address_guarded).__name__}")
    if prediction is not None:
        _count("prediction", prediction)
    hint = (
        "on this torch every new cache has new tensor addresses, and Dynamo guards them"
        if address_guarded
        else "a new cache of the same length passes every guard; the first new length fails one, "
        "and the graph compiled then has a symbolic length (notebook 04)"
    )
    return check_answer(1, prediction, observed, hint=hint)


def check_stop_in_step(prediction: int | None, graph_breaks: int) -> str:
    """Exercise 2: graph breaks of a decoding step that checks for the end-of-text token itself.

    ``graph_breaks`` is what ``torch._dynamo.explain`` reported for the learner's step
    (``graph_break_count``); a step without a data-dependent check has none, and is rejected.

    Example:
        >>> check_stop_in_step(None, 1)
        'Exercise 2: not answered yet.'
        >>> check_stop_in_step(1, 1)
        'Exercise 2: correct.'
    """
    graph_breaks = _count("graph_breaks", graph_breaks)
    if prediction is None:
        return "Exercise 2: not answered yet."
    _count("prediction", prediction)
    if graph_breaks == 0:
        raise AssertionError(
            "Exercise 2: your step compiled as one graph, so it does not look at a token's value in "
            "Python yet. Hint: branch on `bool((next_token == EOS).all())` inside the step."
        )
    return check_answer(
        2,
        prediction,
        graph_breaks,
        hint="Dynamo cannot know a tensor's value while tracing: a Python branch on it cuts the graph",
    )
