"""Models (including the real loading path), compiler counters and the environment card."""

from __future__ import annotations

import pytest
import torch

from helpers import counters, env, models


def test_mlp_sizes_by_device():
    for device in ("cpu", "cuda", "mps"):
        assert models.mlp_size(device).width > 0
    assert models.mlp_size("cuda").width >= models.mlp_size("cpu").width


@pytest.mark.parametrize(("width", "depth"), [(0, 2), (8, -1), (8, 1.5)])
def test_mlp_rejects_bad_sizes(width, depth):
    with pytest.raises(ValueError, match="width|depth"):
        models.TinyMLP(width, depth)


def test_gpt2_size_overrides_and_errors():
    assert models.gpt2_size("cpu", n_layer=3).n_layer == 3
    with pytest.raises(ValueError, match="n_layers"):
        models.gpt2_size("cpu", n_layers=3)
    with pytest.raises(ValueError, match="n_head"):
        models.gpt2_size("cpu", n_embd=100, n_head=3)
    with pytest.raises(ValueError, match="seq_len"):
        models.gpt2_size("cpu", seq_len=10_000)
    with pytest.raises(ValueError, match="n_layer"):
        models.gpt2_size("cpu", n_layer=0)
    with pytest.raises(ValueError, match="device"):
        models.gpt2_size("tpu")


def test_gpt2_goes_through_save_and_from_pretrained(tmp_path):
    size = models.gpt2_size("cpu", n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=16, seq_len=8)
    model = models.build_gpt2(size, device="cpu", via_pretrained=False)
    again = models.save_and_reload(model, tmp_path)
    assert (tmp_path / "config.json").exists()
    tokens = models.random_tokens(size, batch=2)
    with torch.no_grad():
        torch.testing.assert_close(again(tokens).logits, model(tokens).logits)
    assert not again.training


def test_build_gpt2_is_seeded():
    size = models.gpt2_size("cpu", n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=16, seq_len=8)
    a = models.build_gpt2(size, seed=1, via_pretrained=False)
    b = models.build_gpt2(size, seed=1, via_pretrained=False)
    assert torch.equal(a.lm_head.weight, b.lm_head.weight)


def test_save_and_reload_rejects_plain_modules(tmp_path):
    with pytest.raises(TypeError, match="PreTrainedModel"):
        models.save_and_reload(torch.nn.Linear(2, 2), tmp_path)


def test_gpt2_config_rejects_other_types():
    with pytest.raises(TypeError, match="GPT2Size"):
        models.gpt2_config({"n_layer": 2})


def test_random_tokens_errors():
    size = models.gpt2_size("cpu")
    assert models.random_tokens(size, batch=3, seq_len=4).shape == (3, 4)
    with pytest.raises(ValueError, match="batch"):
        models.random_tokens(size, batch=0)
    with pytest.raises(ValueError, match="seq_len"):
        models.random_tokens(size, seq_len=size.n_positions + 1)


def test_graph_report_counts_breaks_and_reasons():
    def broken(x):
        x = x + 1
        torch._dynamo.graph_break()
        return x * 2

    report = counters.graph_report(broken, torch.ones(2))
    assert (report.graph_count, report.graph_break_count) == (2, 1)
    assert len(report.break_reasons) == 1 and "\n" not in report.break_reasons[0]
    with pytest.raises(TypeError, match="fn"):
        counters.graph_report(3)


def test_compile_counts_recompilations_and_reasons():
    torch._dynamo.reset()
    doubled = torch.compile(lambda x: x * 2, backend="eager", dynamic=False)
    with counters.CompileCounts() as counts:
        doubled(torch.ones(2))
        doubled(torch.ones(2))
        doubled(torch.ones(3))
        doubled(torch.ones(3, dtype=torch.float64))
    assert counts.frames == 3 and counts.recompilations == 2
    assert any("size mismatch" in r for r in counts.recompile_reasons)
    assert any("dtype mismatch" in r for r in counts.recompile_reasons)
    assert "frames=3" in counts.summary()


def test_compile_counts_nothing_when_nothing_compiles():
    doubled = torch.compile(lambda x: x * 2, backend="eager")
    doubled(torch.ones(2))
    with counters.CompileCounts() as counts:
        doubled(torch.ones(2))
    assert (counts.frames, counts.recompilations, counts.summary()) == (0, 0, "")


def test_environment_card_and_hardware():
    card = env.environment_card("cpu")
    for key in ("python", "torch", "transformers", "device", "hardware", "cpu threads", "compile"):
        assert key in card
    assert env.hardware_name("cpu").startswith("CPU: ")
    with pytest.raises(ValueError, match="device"):
        env.environment_card("tpu")


def test_seed_and_setup():
    env.seed_everything(3)
    first = torch.rand(2)
    assert env.setup_notebook("cpu", seed=3) == "cpu"
    assert torch.equal(first, torch.rand(2))
    assert torch.get_float32_matmul_precision() == "high"
    with pytest.raises(ValueError, match="seed"):
        env.seed_everything(-1)


def test_every_counter_key_moves_in_a_real_compile(tmp_path, monkeypatch):
    # A key renamed in another torch release would read 0 forever: make each one move once.
    from helpers.counters import _COUNTER_KEYS, CompileCounts
    from helpers.guard import compile_support

    if not compile_support("cpu").ok:
        pytest.skip(f"needs Inductor: {compile_support('cpu').reason}")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))

    def f(x):
        return torch.sin(x) + 1

    x = torch.randn(8, requires_grad=True)
    moved: set[str] = set()
    for compile_kwargs in ({}, {}, {"mode": "reduce-overhead"}):  # cold, then warm, then CUDA graphs
        torch._dynamo.reset()
        with CompileCounts() as counts:
            torch.compile(f, **compile_kwargs)(x).sum().backward()
        moved |= {name for name in _COUNTER_KEYS if getattr(counts, name)}
    torch._dynamo.reset()
    linear = torch.nn.Linear(4, 4).eval()
    with torch.no_grad(), torch._inductor.config.patch(freezing=True), CompileCounts() as counts:
        torch.compile(linear)(torch.randn(2, 4))  # frozen graphs bypass the FX graph cache
    moved |= {name for name in _COUNTER_KEYS if getattr(counts, name)}
    torch._dynamo.reset()

    def broken(x):
        x = x + 1
        torch._dynamo.graph_break()
        return x * 2

    with CompileCounts() as counts:
        torch.compile(broken, backend="eager")(torch.ones(2))
    torch._dynamo.reset()
    assert counts.graph_breaks == 1
    assert moved == set(_COUNTER_KEYS), f"never moved: {sorted(set(_COUNTER_KEYS) - moved)}"
