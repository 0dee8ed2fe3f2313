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
    answer raises ``AssertionError`` with what was expected, what was given, and the hint, so
    a checked cell fails loudly; a right one returns ``"Exercise N: correct."``.

    Example:
        >>> check_answer(1, None, 3, hint="count the breaks")
        'Exercise 1: not answered yet.'
        >>> check_answer(1, 3, 3, hint="count the breaks")
        'Exercise 1: correct.'
        >>> check_answer(1, 2, 3, hint="count the breaks")
        Traceback (most recent call last):
        ...
        AssertionError: Exercise 1: expected 3, got 2. Hint: count the breaks.
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
        if isinstance(answer, Mapping) and isinstance(expected, Mapping):
            wrong = {key: answer.get(key) for key in expected if answer.get(key) != expected[key]}
            extra = sorted(map(str, set(answer) - set(expected)))
            what = f"wrong for {wrong}" if wrong else f"unexpected keys {extra}"
            raise AssertionError(f"{label}: {what}. Hint: {hint.rstrip('.')}.")
        raise AssertionError(f"{label}: expected {expected!r}, got {answer!r}. Hint: {hint.rstrip('.')}.")
    return f"{label}: correct."
