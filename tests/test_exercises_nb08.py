"""Notebook 08's exercise checks: right answers pass, realistic wrong answers are rejected."""

from __future__ import annotations

import inspect
import logging

import pytest
import torch

from helpers import decoding
from helpers.exercises.nb08 import check_new_cache_recompilations, check_stop_in_step
from helpers.models import build_gpt2, gpt2_size, random_tokens

EOS = 0


@pytest.fixture(scope="module")
def tiny():
    size = gpt2_size("cpu", n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=128, seq_len=8)
    return build_gpt2(size, via_pretrained=False).eval(), random_tokens(size, batch=1, seq_len=8)


def decode_step(model, token, cache, positions):
    logits = model(input_ids=token, past_key_values=cache, use_cache=True, **positions).logits
    return logits[:, -1].argmax(dim=-1, keepdim=True)


def step_with_stop(model, token, cache, positions):
    next_token = decode_step(model, token, cache, positions)
    if bool((next_token == EOS).all()):
        print("end of text")
    return next_token


def test_exercise_1_against_a_real_run(tiny):
    from helpers.counters import CompileCounts

    model, prompt = tiny
    guarded = inspect.signature(torch._dynamo.mark_static_address).parameters["guard"].default
    torch._dynamo.reset()
    step = torch.compile(decode_step, backend="eager", fullgraph=True)
    with CompileCounts() as counts:
        for max_len in (64, 64, 96, 128, 64):
            decoding.generate_static(model, step, prompt, 2, max_len=max_len)
    right = 4 if guarded else 1
    assert counts.recompilations == right
    assert check_new_cache_recompilations(None, right, address_guarded=guarded).endswith("not answered yet.")
    assert check_new_cache_recompilations(right, right, address_guarded=guarded) == "Exercise 1: correct."
    for wrong in {4, 2, 0, 5} - {right}:  # one per new cache, one per new length, none, every request
        with pytest.raises(AssertionError, match="Exercise 1: expected"):
            check_new_cache_recompilations(wrong, right, address_guarded=guarded)


def test_exercise_1_bad_arguments():
    with pytest.raises(ValueError, match="observed"):
        check_new_cache_recompilations(1, -1, address_guarded=False)
    with pytest.raises(ValueError, match="prediction"):
        check_new_cache_recompilations(1.5, 1, address_guarded=False)
    with pytest.raises(TypeError, match="address_guarded"):
        check_new_cache_recompilations(1, 1, address_guarded="no")


def _break_reasons(model, prompt, step) -> int:
    torch._dynamo.reset()
    cache = decoding.new_static_cache(model, 16)
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
    with torch.inference_mode():
        decoding.generate_static(model, decode_step, prompt, 1, cache=cache)
        place = decoding.position_inputs(model, torch.tensor([prompt.shape[1]]))
        return len(torch._dynamo.explain(step)(model, prompt[:, -1:], cache, place).break_reasons)


def test_exercise_2_against_explain(tiny):
    model, prompt = tiny
    breaks = _break_reasons(model, prompt, step_with_stop)
    assert breaks == 1
    assert check_stop_in_step(None, breaks) == "Exercise 2: not answered yet."
    assert check_stop_in_step(1, breaks) == "Exercise 2: correct."
    for wrong in (0, 2):  # "the step is still one graph"; "one break per branch"
        with pytest.raises(AssertionError, match="Exercise 2: expected 1"):
            check_stop_in_step(wrong, breaks)
    # The placeholder step (no check on the token's value) has no break: rejected, not "correct".
    unchanged = _break_reasons(model, prompt, decode_step)
    assert unchanged == 0
    with pytest.raises(AssertionError, match="one graph"):
        check_stop_in_step(0, unchanged)
