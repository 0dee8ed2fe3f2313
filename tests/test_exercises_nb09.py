"""Notebook 09's exercise checks: right answers pass, realistic wrong answers are rejected."""

from __future__ import annotations

import copy
import re

import pytest
import torch
from transformers import GPT2LMHeadModel

from helpers.decoding import decode_step_bytes
from helpers.exercises.nb09 import (
    check_batch_bytes,
    check_float32_activations,
    check_mlp_only,
    fused_int8_calls,
)
from helpers.models import gpt2_config, gpt2_size
from helpers.quantize import linearize, quantize_int8

FUSED = "buf{i} = extern_kernels._weight_int8pack_mm(reinterpret_tensor(buf{i}, (1, 64), (0, 1), 0), w, s)\n"
UNFUSED = "extern_kernels.mm(buf0, buf1, out=buf2)\ncpp_fused_0(const int8_t* in_ptr0, float* out_ptr0)\n"


def fused(n: int) -> str:
    return "".join(FUSED.format(i=i) for i in range(n))


def test_counting_fused_calls():
    assert fused_int8_calls(fused(3) + UNFUSED) == 3
    with pytest.raises(TypeError, match="generated_code"):
        fused_int8_calls(None)


@pytest.fixture(scope="module")
def tiny_models():
    """The notebook's tiny GPT-2, int8 and bfloat16, and the bytes of their steps at batch 1 and 16."""
    config = gpt2_config(
        gpt2_size("cpu", n_layer=2, n_embd=64, n_head=2, vocab_size=512, n_positions=32, seq_len=8)
    )
    config.tie_word_embeddings = False
    tiny = linearize(GPT2LMHeadModel(config)).eval()
    half, int8 = copy.deepcopy(tiny).to(torch.bfloat16), quantize_int8(tiny).to(torch.bfloat16)
    steps = {
        batch: (decode_step_bytes(int8, 32, batch=batch), decode_step_bytes(half, 32, batch=batch))
        for batch in (1, 16)
    }
    return {"int8_model": int8, "half_model": half, "positions": 32, "batch": 16}, steps


def test_exercise_1(tiny_models):
    models, steps = tiny_models
    int8, half = steps[16]
    assert check_batch_bytes(None, **models) == "Exercise 1: not answered yet."
    percent = 100 * sum(int8.values()) / sum(half.values())
    for right in (round(percent), percent - 1.5, percent + 2):
        assert check_batch_bytes(right, **models) == "Exercise 1: correct."
    batch_1 = 100 * sum(steps[1][0].values()) / sum(steps[1][1].values())
    # "int8 halves the bytes"; batch 1's share (the cache forgotten); "the cache makes it all the same"
    for wrong, direction in ((50, "low"), (round(batch_1), "low"), (100, "high"), (percent + 3, "high")):
        with pytest.raises(AssertionError, match=f"too {direction}") as error:
            check_batch_bytes(wrong, **models)
        assert f"{round(percent)}" not in str(error.value).replace(f"{wrong!r}", "")
    with pytest.raises(AssertionError, match="looks like a fraction"):
        check_batch_bytes(percent / 100, **models)
    for bad in ("76", -1, True):
        with pytest.raises(ValueError, match="prediction must be a percentage"):
            check_batch_bytes(bad, **models)
    with pytest.raises(TypeError, match="int8_model"):
        check_batch_bytes(70, **(models | {"int8_model": int8}))
    with pytest.raises(TypeError, match="half_model"):
        check_batch_bytes(70, **(models | {"half_model": None}))
    for label, bad in (("positions", 0), ("batch", 1.5), ("batch", True)):
        with pytest.raises(ValueError, match=f"{label} must be a positive int"):
            check_batch_bytes(70, **(models | {label: bad}))


MLP = [f"transformer.h.{i}.mlp.{n}" for i in range(2) for n in ("c_fc", "c_proj")]
ATTN = [f"transformer.h.{i}.attn.{n}" for i in range(2) for n in ("c_attn", "c_proj")]
ALL = MLP + ATTN + ["lm_head"]


def test_exercise_2():
    assert check_mlp_only(None, None, int8_layers=ALL, n_layer=2).endswith("not answered yet.")
    assert check_mlp_only(4, fused(4), int8_layers=MLP, n_layer=2) == "Exercise 2: correct."
    for wrong in (2, 9, 5):  # one per block; every layer; 4 per block plus the head minus attention
        with pytest.raises(AssertionError, match=r"Exercise 2: [259] is too (high|low)"):
            check_mlp_only(wrong, fused(4), int8_layers=MLP, n_layer=2)
    # the whole model quantized (the placeholder)
    with pytest.raises(AssertionError, match="outside the MLPs") as error:
        check_mlp_only(9, fused(9), int8_layers=ALL, n_layer=2)
    assert not re.search(r"\b\d+\b", str(error.value).split("(e.g.")[0].removeprefix("Exercise 2"))
    # as many layers as the MLPs have, but the wrong ones: only=".attn." or only="c_proj"
    with pytest.raises(AssertionError, match="some int8 layers are outside the MLPs"):
        check_mlp_only(4, fused(4), int8_layers=ATTN, n_layer=2)
    c_proj = [n for n in MLP + ATTN if n.endswith("c_proj")]
    with pytest.raises(AssertionError, match="outside the MLPs"):
        check_mlp_only(4, fused(4), int8_layers=c_proj, n_layer=2)
    # only c_fc: half the MLP
    with pytest.raises(AssertionError, match="not every MLP layer of every block is int8") as error:
        check_mlp_only(2, fused(2), int8_layers=[n for n in MLP if n.endswith("c_fc")], n_layer=2)
    assert not re.search(r"\b\d+\b", str(error.value).removeprefix("Exercise 2"))
    # MLP-only, but float32 activations: nothing fused
    with pytest.raises(AssertionError, match="bfloat16") as error:
        check_mlp_only(4, UNFUSED, int8_layers=MLP, n_layer=2)
    assert "Exercise 2: the generated code does not call" in str(error.value)
    assert not re.search(r"\b\d+\b", str(error.value).removeprefix("Exercise 2"))
    # where the pattern cannot fire (oneDNN off, say): the count is the generated code's, the reason said
    off = "oneDNN is off"
    said = check_mlp_only(0, UNFUSED, int8_layers=MLP, n_layer=2, unchecked=off)
    assert said.startswith("Exercise 2: correct.") and off in said
    with pytest.raises(AssertionError, match="Exercise 2: 4 is too high") as error:
        check_mlp_only(4, UNFUSED, int8_layers=MLP, n_layer=2, unchecked=off)  # where it would fire
    assert off in str(error.value)
    with pytest.raises(ValueError, match="generated_code"):
        check_mlp_only(9, None, int8_layers=MLP, n_layer=2, unchecked=off)
    with pytest.raises(AssertionError, match="outside the MLPs"):
        check_mlp_only(9, None, int8_layers=ALL, n_layer=2, unchecked=off)
    with pytest.raises(TypeError, match="unchecked"):
        check_mlp_only(4, fused(4), int8_layers=MLP, n_layer=2, unchecked=True)
    with pytest.raises(ValueError, match="n_layer"):
        check_mlp_only(4, fused(4), int8_layers=MLP, n_layer=0)
    with pytest.raises(TypeError, match="int8_layers"):
        check_mlp_only(4, fused(4), int8_layers=4, n_layer=2)


def test_exercise_2_float32_activations():
    def check(prediction, code, layers=MLP):
        return check_float32_activations(prediction, code, int8_layers=layers, n_layer=2)

    assert check(None, None).endswith("not answered yet.")
    assert check(0, UNFUSED).endswith("correct.")
    with pytest.raises(AssertionError, match=r"Exercise 2 \(float32 activations\): 4 is too high"):
        check(4, UNFUSED)
    # counted, not assumed: where the code does call the fused kernel, 0 is wrong
    with pytest.raises(AssertionError, match="0 is too low"):
        check(0, fused(4))
    # the first part's model: the placeholder (every layer int8) is rejected, as there
    with pytest.raises(
        AssertionError, match=r"Exercise 2 \(float32 activations\): some int8 layers are outside"
    ):
        check(0, UNFUSED, layers=ALL)
    with pytest.raises(AssertionError, match="not every MLP layer"):
        check(0, UNFUSED, layers=MLP[:2])
    with pytest.raises(ValueError, match="prediction must be a count"):
        check(-1, UNFUSED)
    with pytest.raises(ValueError, match="generated_code"):
        check(0, None)
    with pytest.raises(ValueError, match="n_layer"):
        check_float32_activations(0, UNFUSED, int8_layers=MLP, n_layer=0)
