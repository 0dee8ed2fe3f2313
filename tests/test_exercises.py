"""The exercises' self-check (helpers.exercises)."""

from __future__ import annotations

import pytest

from helpers.exercises import check_answer, settings_kept


def test_not_answered_right_and_wrong():
    assert check_answer(2, None, 4, hint="guards") == "Exercise 2: not answered yet."
    assert check_answer(2, 4, 4, hint="guards") == "Exercise 2: correct."
    with pytest.raises(AssertionError, match=r"Exercise 2: 3 is too low\. Hint: guards\."):
        check_answer(2, 3, 4, hint="guards")


def test_answers_of_a_function_on_several_cases():
    expected = {"a": True, "b": False}
    assert check_answer(1, {"a": None, "b": None}, expected, hint="h") == "Exercise 1: not answered yet."
    assert check_answer(1, dict(expected), expected, hint="h") == "Exercise 1: correct."
    with pytest.raises(AssertionError, match=r"wrong for 'b' \(you gave True\)"):
        check_answer(1, {"a": True, "b": True}, expected, hint="h")
    with pytest.raises(AssertionError, match=r"unexpected keys \['c'\]"):
        check_answer(1, {**expected, "c": True}, expected, hint="h")


def test_a_custom_unanswered_value():
    assert check_answer("3", -1, 7, hint="h", unanswered=-1) == "Exercise 3: not answered yet."


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"exercise": 1.5}, TypeError, "exercise"),
        ({"hint": ""}, ValueError, "hint"),
        ({"hint": None}, ValueError, "hint"),
    ],
)
def test_bad_input_names_the_argument(kwargs, error, match):
    arguments = {"exercise": 1, "answer": 1, "expected": 1, "hint": "h", **kwargs}
    with pytest.raises(error, match=match):
        check_answer(**arguments)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [(3, 4), (12, 7), ("fullgraph", "dynamic"), ((1, 0), (2, 1)), ({"a": 1, "b": 5}, {"a": 1, "b": 8})],
)
def test_a_wrong_answer_is_told_what_is_wrong_not_the_answer(answer, expected):
    with pytest.raises(AssertionError) as caught:
        check_answer(1, answer, expected, hint="look again")
    message = str(caught.value)
    shown = expected["b"] if isinstance(expected, dict) else expected
    assert repr(shown) not in message.replace(repr(answer), ""), message


def test_settings_kept_puts_back_also_when_the_block_raises_and_skips_a_missing_setting():
    import torch._dynamo

    limit = torch._dynamo.config.recompile_limit
    with pytest.raises(RuntimeError, match="learner"):
        with settings_kept(
            ("torch._dynamo.config", "recompile_limit"), ("torch._dynamo.config", "no_such")
        ) as changed:
            torch._dynamo.config.recompile_limit = limit + 1
            raise RuntimeError("learner's function failed")
    assert changed == ["recompile_limit"] and torch._dynamo.config.recompile_limit == limit
    with settings_kept(("torch._dynamo.config", "recompile_limit")) as changed:
        pass
    assert changed == []
