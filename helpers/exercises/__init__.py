"""The self-check every exercise ends with: not answered yet, right, or wrong with a hint."""

from __future__ import annotations

from collections.abc import Mapping
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
        raise AssertionError(f"{label}: {_what_is_wrong(answer, expected)}. Hint: {hint.rstrip('.')}.")
    return f"{label}: correct."


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
