"""Notebook 08's exercise checks: right answers pass, realistic wrong answers are rejected."""

from __future__ import annotations

import logging

import pytest
import torch
from transformers import DynamicCache, StaticCache

from helpers import decoding
from helpers.exercises.nb08 import REQUESTS, check_one_cache, check_stop_in_step
from helpers.models import build_gpt2, gpt2_size, random_tokens

EOS = 0


@pytest.fixture(scope="module")
def tiny():
    size = gpt2_size("cpu", n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=128, seq_len=8)
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
    return build_gpt2(size, via_pretrained=False).eval(), random_tokens(size, batch=1, seq_len=8)


def decode_step(model, token, cache, positions):
    logits = model(input_ids=token, past_key_values=cache, use_cache=True, **positions).logits
    return logits[:, -1].argmax(dim=-1, keepdim=True)


def generate(model, step, prompt, n_new, cache):
    """The notebook's loop: an eager prefill, then ``step`` per token, a tensor position."""
    n = prompt.shape[1]
    with torch.inference_mode():
        cache.reset()
        logits = model(
            input_ids=prompt, past_key_values=cache, **decoding.position_inputs(model, torch.arange(n))
        ).logits
        token = logits[:, -1].argmax(dim=-1, keepdim=True)
        tokens, position = [token], torch.tensor([n])
        for _ in range(n_new - 1):
            token = step(model, token, cache, decoding.position_inputs(model, position)).clone()
            tokens.append(token)
            position += 1
    return torch.cat([prompt, *tokens], dim=1)


def _check(model, cache_for):
    return check_one_cache(cache_for, model=model, step=decode_step, generate=generate)


def test_exercise_1_right_answers(tiny):
    model, _ = tiny
    assert _check(model, None) == "Exercise 1: not answered yet."
    room = max(n + new for n, new in REQUESTS)
    for size in (room, 96):  # exactly the longest request, or more room
        one = StaticCache(config=model.config, max_cache_len=size)
        assert _check(model, lambda prompt_len, n_new, one=one: one) == (
            "Exercise 1: correct: 1 graph(s), 0 recompilation(s), 1 cache(s) for 5 requests."
        )


def test_exercise_1_wrong_answers(tiny):
    model, _ = tiny
    config = model.config
    small, first, buckets = StaticCache(config=config, max_cache_len=24), {}, {}

    def sized_by_the_first_request(prompt_len, n_new):
        return first.setdefault("cache", StaticCache(config=config, max_cache_len=prompt_len + n_new))

    def two_buckets(prompt_len, n_new):
        room = 32 if prompt_len + n_new <= 32 else 64
        return buckets.setdefault(room, StaticCache(config=config, max_cache_len=room))

    guard = "the first guard that failed"
    wrong = {
        # as written: a new cache sized to each request (a new length recompiles on every release)
        lambda p, n: StaticCache(config=config, max_cache_len=p + n): guard,
        # one size, but a new cache per request: 2.13+ does not recompile, 2.8 does (address guard)
        lambda p, n: StaticCache(config=config, max_cache_len=64): f"{guard}|asks for one cache",
        lambda p, n: small: "does not fit",  # one cache, too small for the longest request
        sized_by_the_first_request: "does not fit",
        two_buckets: guard,  # a cache per bucket: the second size recompiles
        lambda p, n: DynamicCache(): guard,  # a growing cache changes shapes every token
    }
    for answer, message in wrong.items():
        with pytest.raises(AssertionError, match=rf"Exercise 1: .*({message})") as caught:
            _check(model, answer)
        # Review: the hint pointed at the answer verbatim ("allocate one cache, once, with room for
        # every request"); it may point, not give it.
        assert "allocate one cache" not in str(caught.value)
        assert "room for every request" not in str(caught.value)
    with pytest.raises(TypeError, match="cache_for must return a cache"):
        _check(model, lambda p, n: p + n)  # the size, not a cache


def test_exercise_1_a_cache_too_small_is_rejected_before_the_request_runs(tiny):
    # On a GPU, writing past a StaticCache's end is a device-side assert (StaticLayer.update's
    # index_copy_ has no host-side bounds check) that poisons the CUDA context: the check must
    # compare the cache's room with the request before running the model on it.
    model, _ = tiny
    runs = []

    def recording_generate(model, step, prompt, n_new, cache):
        room = min(layer.max_cache_len for layer in cache.layers)
        runs.append((prompt.shape[1], n_new, room))
        return generate(model, step, prompt, n_new, cache)

    for room in (24, max(n + new for n, new in REQUESTS) - 2):  # too small for one request, or for several
        runs.clear()
        small = StaticCache(config=model.config, max_cache_len=room)
        with pytest.raises(
            AssertionError, match=rf"does not fit .*room for {room} positions.*stopped before"
        ) as caught:
            check_one_cache(
                lambda p, n, small=small: small, model=model, step=decode_step, generate=recording_generate
            )
        assert "Hint: the cache must have room" in str(caught.value)
        assert runs and all(p + n - 1 <= r for p, n, r in runs), runs  # no request ran past the cache's end
        rejected = next((p, n) for p, n in REQUESTS if p + n - 1 > room)
        assert f"request of {rejected[0]} + {rejected[1]} tokens" in str(caught.value)
    # Exactly the positions the loop writes (the last new token is never fed back) is enough.
    tight = StaticCache(config=model.config, max_cache_len=max(n + new for n, new in REQUESTS) - 1)
    assert _check(model, lambda p, n: tight).startswith("Exercise 1: correct")


def test_exercise_1_bad_arguments(tiny):
    model, _ = tiny
    with pytest.raises(TypeError, match="cache_for"):
        check_one_cache(StaticCache, model=model, step=decode_step, generate=generate)
    with pytest.raises(TypeError, match="model"):
        check_one_cache(lambda p, n: None, model=torch.nn.Linear(2, 2), step=decode_step, generate=generate)
    with pytest.raises(ValueError, match="requests"):
        check_one_cache(
            lambda p, n: None, model=model, step=decode_step, generate=generate, requests=[(0, 2)]
        )


def step_with_stop(model, token, cache, positions):
    next_token = decode_step(model, token, cache, positions)
    if bool((next_token == EOS).all()):
        print("end of text")
    return next_token


def step_with_item(model, token, cache, positions):
    next_token = decode_step(model, token, cache, positions)
    if next_token.item() == EOS:
        print("end of text")
    return next_token


def step_that_prints(model, token, cache, positions):
    next_token = decode_step(model, token, cache, positions)
    print("next token:", next_token)  # a break, but not on the token's value
    return next_token


def step_with_where(model, token, cache, positions):
    next_token = decode_step(model, token, cache, positions)
    return torch.where(next_token == EOS, torch.full_like(next_token, EOS), next_token)  # no Python branch


def _explain(model, prompt, step):
    torch._dynamo.reset()
    cache = decoding.new_static_cache(model, 16)
    with torch.inference_mode():
        decoding.generate_static(model, decode_step, prompt, 1, cache=cache)
        place = decoding.position_inputs(model, torch.tensor([prompt.shape[1]]))
        return torch._dynamo.explain(step)(model, prompt[:, -1:], cache, place)


def test_exercise_2_against_explain(tiny):
    model, prompt = tiny
    for step in (step_with_stop, step_with_item):
        explanation = _explain(model, prompt, step)
        assert len(explanation.break_reasons) == 1
        # explain's graph_break_count is graph_count - 1: the break ends the step, no second graph
        assert explanation.graph_break_count == 0
        reasons = explanation.break_reasons
        assert check_stop_in_step(None, reasons) == "Exercise 2: not answered yet."
        assert check_stop_in_step(1, reasons) == "Exercise 2: correct."
        for wrong in (0, 2):  # explain's graph_break_count; "one break per branch"
            with pytest.raises(AssertionError, match=r"Exercise 2: [02] is too (high|low)"):
                check_stop_in_step(wrong, reasons)
    # The placeholder step and a torch.where step have no break: rejected whatever the prediction.
    for step in (decode_step, step_with_where):
        reasons = _explain(model, prompt, step).break_reasons
        assert not reasons
        with pytest.raises(AssertionError, match="one graph"):
            check_stop_in_step(0, reasons)
    # A print breaks the graph once, but not on the token's value: rejected.
    reasons = _explain(model, prompt, step_that_prints).break_reasons
    assert len(reasons) == 1
    with pytest.raises(AssertionError, match="not on a token's value"):
        check_stop_in_step(1, reasons)


def test_exercise_2_bad_arguments():
    with pytest.raises(TypeError, match="break_reasons"):
        check_stop_in_step(1, 1)  # the count, not the list
    with pytest.raises(ValueError, match="prediction"):
        check_stop_in_step(1.5, ["Data-dependent branching"])
