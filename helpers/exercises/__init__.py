"""The self-check every exercise ends with: not answered yet, right, or wrong with a hint."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator, Mapping
from typing import Any


def check_answer(
    exercise: int | str, answer: Any, expected: Any, *, hint: str, unanswered: Any = None
) -> str:
    """Compare a learner's ``answer`` with ``expected``; say so, or fail with ``hint``.

    ``answer`` is not answered yet while it is ``unanswered`` (``None`` by default), or a
    mapping whose values all are (the answers of a function tried on several cases). A wrong
    answer raises ``AssertionError`` with what was given, what is wrong about it (too high or too
    low for a number; which cases for a mapping) and the hint, never the expected value, so a
    checked cell fails loudly without giving the answer away; a right one returns
    ``"Exercise N: correct."``.

    Example:
        >>> check_answer(1, None, 3, hint="count the breaks")
        'Exercise 1: not answered yet.'
        >>> check_answer(1, 3, 3, hint="count the breaks")
        'Exercise 1: correct.'
        >>> check_answer(1, 2, 3, hint="count the breaks")
        Traceback (most recent call last):
        ...
        AssertionError: Exercise 1: 2 is too low. Hint: count the breaks.
        >>> check_answer(2, {"a": 1, "b": 2}, {"a": 1, "b": 3}, hint="try each case")
        Traceback (most recent call last):
        ...
        AssertionError: Exercise 2: wrong for 'b' (you gave 2). Hint: try each case.
    """
    if not isinstance(exercise, (int, str)) or isinstance(exercise, bool):
        raise TypeError(f"exercise must be the exercise's number or name; got {type(exercise).__name__}")
    if not isinstance(hint, str) or not hint.strip():
        raise ValueError("hint must be a non-empty sentence that helps without giving the answer away")
    label = f"Exercise {exercise}"
    not_given = answer is unanswered or (
        isinstance(answer, Mapping) and answer and all(value is unanswered for value in answer.values())
    )
    if not_given:
        return f"{label}: not answered yet."
    if answer != expected:
        raise wrong_answer(exercise, _what_is_wrong(answer, expected), hint)
    return f"{label}: correct."


def wrong_answer(exercise: int | str, what: str, hint: str) -> AssertionError:
    """The error for a wrong answer, in :func:`check_answer`'s words: what is wrong, then a hint.

    For a check that says in its own words what is wrong (never the expected value).

    Example:
        >>> wrong_answer(2, "3 is eager's count", "count what the compiled forward saves.")
        AssertionError("Exercise 2: 3 is eager's count. Hint: count what the compiled forward saves.")
    """
    return AssertionError(f"Exercise {exercise}: {what}. Hint: {hint.rstrip('.')}.")


@contextlib.contextmanager
def settings_kept(*settings: tuple[str, str]) -> Iterator[list[str]]:
    """Put back the config ``settings`` (``(module, name)`` pairs) that the block changed, and list them.

    A setting the installed release lacks is skipped. The list fills when the block ends, also when
    it raises, so a check can reject a learner's function that switched a setting off.

    Example:
        >>> import torch._dynamo
        >>> with settings_kept(("torch._dynamo.config", "recompile_limit")) as changed:
        ...     torch._dynamo.config.recompile_limit = 0
        >>> changed, torch._dynamo.config.recompile_limit
        (['recompile_limit'], 8)
    """
    before = {}
    for module_name, name in settings:
        module = importlib.import_module(module_name)
        if hasattr(module, name):
            before[module, name] = getattr(module, name)
    changed: list[str] = []
    try:
        yield changed
    finally:
        for (module, name), value in before.items():
            if getattr(module, name) != value:
                changed.append(name)
                setattr(module, name, value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _what_is_wrong(answer: Any, expected: Any) -> str:
    """What is wrong with ``answer``, in words that do not reveal ``expected``."""
    if isinstance(answer, Mapping) and isinstance(expected, Mapping):
        wrong = [key for key in expected if answer.get(key) != expected[key]]
        if not wrong:
            return f"unexpected keys {sorted(map(str, set(answer) - set(expected)))}"
        given = ", ".join(f"{answer.get(key)!r}" for key in wrong)
        return f"wrong for {', '.join(map(repr, wrong))} (you gave {given})"
    if _is_number(answer) and _is_number(expected):
        return f"{answer!r} is too {'high' if answer > expected else 'low'}"
    return f"{answer!r} is not it"
