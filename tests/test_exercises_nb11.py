"""Notebook 11's exercise checks accept the right answers and reject realistic wrong ones.

The verdicts are tested on reports like those start_shipped() returns (no compiler); two tests start
a real fresh process with a precompiled function built with the eager backend (a few seconds each).
"""

from __future__ import annotations

import pytest
import torch

from helpers.exercises.nb11 import (
    ANY_BATCHES,
    EXAMPLE_BATCH,
    METHODS,
    check_any_batch,
    check_shipped,
    example_input,
    start_shipped,
    swish_norm,
    verdict_of,
)

PRECOMPILE = hasattr(torch.compiler, "load_compiled_function") and getattr(
    torch._dynamo.config, "enable_aot_compile", False
)


def report(method="precompiled function", frames=0, batches=(EXAMPLE_BATCH,), **changes):
    base = {
        "method": method,
        "load_error": None,
        "errors": {},
        "matches": {str(b): True for b in batches},
        "frames": frames,
        "graphs": frames,
    }
    return {**base, **changes}


def test_unanswered():
    assert check_shipped(None, None) == "Exercise 1: not answered yet."
    assert check_any_batch("AOTInductor package", None) == "Exercise 2: not answered yet."
    assert verdict_of(1, None) == "Exercise 1: not answered yet."


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="method"):
        check_shipped("torch.save", lambda path: None)
    with pytest.raises(TypeError, match="ship"):
        check_shipped("precompiled function", "forward.bin")
    with pytest.raises(ValueError, match="exercise"):
        verdict_of(3, report())
    with pytest.raises(ValueError, match="batches"):
        start_shipped("precompiled function", "x", batches="8")
    with pytest.raises(TypeError, match="report"):
        verdict_of(1, {"method": "precompiled function"})


@pytest.mark.parametrize("method", ["precompiled function", "AOTInductor package"])
def test_right_reports_pass(method):
    assert verdict_of(1, report(method)).startswith("Exercise 1: correct")
    assert verdict_of(2, report(method, batches=ANY_BATCHES)).startswith("Exercise 2: correct")


def test_wrong_reports_are_rejected():
    # The mega-cache: Inductor's work is shipped, but Dynamo traces again in the new process.
    with pytest.raises(AssertionError, match="traced 1 frame"):
        verdict_of(1, report("mega-cache", frames=1))
    # Something that is not the method's file (e.g. a mega-cache saved but loaded as a package).
    with pytest.raises(AssertionError, match="could not load"):
        verdict_of(1, report("AOTInductor package", load_error="RuntimeError: not a zip archive"))
    # Another function compiled (or another input): the outputs differ from eager swish_norm.
    with pytest.raises(AssertionError, match="differs from eager"):
        verdict_of(1, report(matches={str(EXAMPLE_BATCH): False}))
    # Exercise 2 with a static shape: the first new batch fails a guard or the input check.
    static = report(batches=ANY_BATCHES, errors={"3": "RuntimeError: GuardManager check failed"})
    del static["matches"]["3"]
    with pytest.raises(AssertionError, match="batch of 3"):
        verdict_of(2, static)
    # Exercise 2 with a package exported for a range too narrow (Dim max=40, the largest batch the
    # text names before "up to 64"): the input check the checker turns on refuses the batch of 64.
    narrow = report(
        "AOTInductor package",
        batches=ANY_BATCHES,
        errors={"64": "RuntimeError: input_handles[0]: dim value is too large at 0, expected <= 40, got: 64"},
    )
    del narrow["matches"]["64"]
    with pytest.raises(AssertionError, match="batch of 64"):
        verdict_of(2, narrow)
    # A report that skipped a batch size.
    with pytest.raises(AssertionError, match="covers batches"):
        verdict_of(2, report(batches=(EXAMPLE_BATCH,)))


def test_exercise_2_hint_points_without_giving_the_answer():
    static = report(batches=ANY_BATCHES, errors={"3": "RuntimeError: GuardManager check failed"})
    del static["matches"]["3"]
    with pytest.raises(AssertionError, match="section 3") as failed:
        verdict_of(2, static)  # the same hint as check_any_batch's
    assert "dynamic=True" not in str(failed.value) and "Dim" not in str(failed.value)


def test_exercise_2_hint_fits_a_range_too_narrow():
    # Review: a package exported with Dim("batch", min=1, max=40) was told "your artifact was made
    # for one batch size", which is false for it. The hint names both cases and gives neither fix.
    narrow = report(
        "AOTInductor package",
        batches=ANY_BATCHES,
        errors={"64": "RuntimeError: input_handles[0]: dim value is too large at 0, expected <= 40, got: 64"},
    )
    del narrow["matches"]["64"]
    with pytest.raises(AssertionError, match="batch of 64") as failed:
        verdict_of(2, narrow)
    hint = str(failed.value).split("Hint: ")[1]
    assert "made for one batch size;" not in hint
    assert "one size, or for a range that does not reach them all" in hint
    assert "Dim" not in hint and "dynamic=True" not in hint and "64" not in hint


def test_a_method_this_torch_lacks_is_named_before_shipping(monkeypatch):
    import helpers.exercises.nb11 as nb11

    monkeypatch.setattr(nb11, "precompile_available", lambda: False)
    assert "precompiled function" not in nb11.offered_methods()
    with pytest.raises(AssertionError, match="has no precompiled function by default; pick one of"):
        nb11.check_shipped("precompiled function", lambda path: None)


def test_exercise_2_asks_for_the_whole_range():
    # A range that stops short of 64 passed when the largest batch tried was 40.
    assert max(ANY_BATCHES) == 64 and EXAMPLE_BATCH in ANY_BATCHES


def test_the_example_is_the_same_everywhere():
    assert torch.equal(example_input(3), example_input(3))
    assert swish_norm(example_input()).shape == (EXAMPLE_BATCH, 16)
    assert set(METHODS) == {"mega-cache", "precompiled function", "AOTInductor package"}


@pytest.mark.skipif(not PRECOMPILE, reason="this torch has no precompiled function")
def test_a_real_precompiled_function_passes_exercise_1_and_a_static_one_fails_exercise_2():
    def ship_static(path):
        compiled = torch.compile(swish_norm, fullgraph=True, backend="eager")
        compiled.aot_compile(((example_input(),), {})).save_compiled_function(str(path))

    assert check_shipped("precompiled function", ship_static).startswith("Exercise 1: correct")
    with pytest.raises(AssertionError, match="batch of 3"):
        check_any_batch("precompiled function", ship_static)


@pytest.mark.skipif(not PRECOMPILE, reason="this torch has no precompiled function")
def test_a_precompiled_function_that_returns_more_than_the_output_fails():
    def ship_pair(path):  # swish_norm's output, and a second tensor: not what swish_norm returns
        compiled = torch.compile(lambda x: (swish_norm(x), x * 0), fullgraph=True, backend="eager")
        compiled.aot_compile(((example_input(),), {})).save_compiled_function(str(path))

    with pytest.raises(AssertionError, match="Exercise 1"):
        check_shipped("precompiled function", ship_pair)
