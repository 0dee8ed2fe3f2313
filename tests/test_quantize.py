"""helpers.quantize: the int8 surgery, and a check that a compiled step which lost its quantization fails."""

from __future__ import annotations

import pytest
import torch

from helpers.guard import compile_support
from helpers.models import gpt2_config, gpt2_size
from helpers.quantize import (
    WeightOnlyInt8Linear,
    check_matches_eager,
    int8_fusion_unchecked,
    linearize,
    quantize_int8,
    relative_distance,
)

needs_inductor = pytest.mark.skipif(not compile_support("cpu").ok, reason="Inductor cannot build C++ here")


def small_gpt2():
    """A GPT-2 wide enough (256) that int8's effect on the logits stands clear of bfloat16 rounding."""
    from transformers import GPT2LMHeadModel

    size = gpt2_size("cpu", n_layer=2, n_embd=256, n_head=4, vocab_size=2048, n_positions=32, seq_len=8)
    config = gpt2_config(size)
    config.tie_word_embeddings = False
    torch.manual_seed(0)
    return linearize(GPT2LMHeadModel(config)).eval()


def test_quantize_int8_copies_and_quantizes_the_layers_named():
    model = small_gpt2()
    mlp_only = quantize_int8(model, only=lambda name: ".mlp." in name)
    names = [name for name, m in mlp_only.named_modules() if isinstance(m, WeightOnlyInt8Linear)]
    assert names == [f"transformer.h.{i}.mlp.{n}" for i in range(2) for n in ("c_fc", "c_proj")]
    everything = quantize_int8(model)
    assert isinstance(everything.lm_head, WeightOnlyInt8Linear)  # a top-level layer's name: "lm_head"
    assert not any(isinstance(m, WeightOnlyInt8Linear) for m in model.modules())  # the original kept
    layer = everything.transformer.h[0].mlp.c_fc
    original = model.transformer.h[0].mlp.c_fc.weight
    assert layer.weight.dtype == torch.int8 and layer.weight.abs().amax(dim=1).eq(127).all()
    dequantized = layer.weight.float() * layer.scales[:, None]
    assert (dequantized - original).abs().max() <= layer.scales.max() / 2 + 1e-6  # rounding, no more


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        quantize_int8("gpt2")
    with pytest.raises(TypeError, match="only must be a function"):
        quantize_int8(torch.nn.Linear(2, 2), only=".mlp.")
    with pytest.raises(TypeError, match="linear must be a torch.nn.Linear"):
        WeightOnlyInt8Linear(torch.nn.Conv1d(2, 2, 1))
    with pytest.raises(ValueError, match="differ in shape"):
        relative_distance(torch.ones(2), torch.ones(3))
    with pytest.raises(ValueError, match="effect must be a positive float"):
        check_matches_eager(torch.ones(2), torch.ones(2), effect=0.0)
    with pytest.raises(ValueError, match="share must be a float between 0 and 1"):
        check_matches_eager(torch.ones(2), torch.ones(2), effect=0.1, share=1.5)


@needs_inductor
def test_a_compiled_step_that_lost_its_quantization_fails():
    model = small_gpt2()
    bfloat16 = quantize_int8(model, only=lambda name: False).to(torch.bfloat16)  # the same, not quantized
    int8 = quantize_int8(model).to(torch.bfloat16)
    tokens = torch.randint(0, 2048, (1, 32), generator=torch.Generator().manual_seed(0))

    def logits(m):
        return m(input_ids=tokens).logits.float()

    torch._dynamo.reset()
    with torch.no_grad():
        effect = relative_distance(logits(int8), logits(model))
        eager_int8 = logits(int8)
        compiled_int8 = logits(torch.compile(int8))
        lost = logits(torch.compile(bfloat16))  # a compiled step that ran the unquantized weights
    check_matches_eager(compiled_int8, eager_int8, effect=effect)  # the faithful step passes
    with pytest.raises(AssertionError, match="more than 0.75 of the effect"):
        check_matches_eager(lost, eager_int8, effect=effect)


def test_int8_fusion_unchecked_says_where_the_pattern_cannot_fire(monkeypatch):
    assert "wants bfloat16" in int8_fusion_unchecked("cpu", torch.float16)
    assert "cpu, cuda and xpu" in int8_fusion_unchecked("mps", torch.bfloat16)
    assert "asserted on a CPU only" in int8_fusion_unchecked("cuda:0", torch.bfloat16)
    if torch._C._has_mkldnn:
        monkeypatch.setattr(torch.backends.mkldnn, "enabled", False)  # flags() would warn about TF32
        assert "oneDNN is off" in int8_fusion_unchecked("cpu", torch.bfloat16)
        monkeypatch.undo()
        assert int8_fusion_unchecked("cpu", torch.bfloat16) is None  # an x86 CPU, oneDNN on
    # the pattern registers on ACL from 2.10 (_mkldnn_fusion_init), without oneDNN from 2.12 (lazy_init)
    for version, on_acl_registers, without_registers in (
        ("2.8.0", False, False),
        ("2.9.1", False, False),
        ("2.10.0", True, False),
        ("2.11.0", True, False),
        ("2.12.0", True, True),
        ("2.15.0", True, True),
    ):
        monkeypatch.setattr(torch, "__version__", version)
        monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_acl_supported", lambda: True)
        on_acl = int8_fusion_unchecked("cpu", torch.bfloat16)
        assert on_acl is None if on_acl_registers else "ACL" in on_acl
        monkeypatch.setattr(torch._C, "_has_mkldnn", False)
        without = int8_fusion_unchecked("cpu", torch.bfloat16)
        assert without is None if without_registers else "without oneDNN" in without
        monkeypatch.undo()
    with pytest.raises(TypeError, match="activations must be a floating torch.dtype"):
        int8_fusion_unchecked("cpu", torch.int8)
    with pytest.raises(TypeError, match="activations"):
        int8_fusion_unchecked("cpu", "bfloat16")
