"""Models (including the real loading path), compiler counters and the environment card."""

from __future__ import annotations

import pytest
import torch

from helpers import counters, env, models

TINY = models.gpt2_size("cpu", n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=16, seq_len=8)


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
    for key in (
        "python",
        "torch",
        "transformers",
        "device",
        "hardware",
        "cpu threads",
        "float32 matmul",
        "compile",
    ):
        assert key in card
    assert env.hardware_name("cpu").startswith("CPU: ")
    with pytest.raises(ValueError, match="device"):
        env.environment_card("tpu")


def test_setup_seeds_and_sets_precision():
    import random

    assert env.setup_notebook("cpu", seed=3) == "cpu"
    first = (torch.rand(2), random.random())
    env.setup_notebook("cpu", seed=3)
    assert torch.equal(first[0], torch.rand(2)) and first[1] == random.random()
    assert torch.get_float32_matmul_precision() == "high"
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="seed"):
            env.setup_notebook("cpu", seed=bad)


def test_compile_counts_frames_under_fullgraph():
    # Dynamo's own frames counter stays 0 under fullgraph=True; CompileCounts counts the compile.
    torch._dynamo.reset()
    doubled = torch.compile(lambda x: x * 2, backend="eager", fullgraph=True)
    with counters.CompileCounts() as counts:
        doubled(torch.ones(2))
        doubled(torch.ones(2, dtype=torch.float64))
    assert (counts.frames, counts.graphs, counts.recompilations) == (2, 2, 1)
    assert (
        counts.as_dict()["frames"] == 2 and counts.as_dict()["recompile_reasons"] == counts.recompile_reasons
    )
    torch._dynamo.reset()


def test_compile_counts_do_not_count_a_frame_past_the_recompile_limit():
    torch._dynamo.reset()
    doubled = torch.compile(lambda x: x * 2, backend="eager", dynamic=False)
    with torch._dynamo.config.patch(recompile_limit=2), counters.CompileCounts() as counts:
        import logging

        logging.disable(logging.WARNING)
        try:
            for n in range(1, 5):
                doubled(torch.ones(n))
        finally:
            logging.disable(logging.NOTSET)
    assert counts.frames == 2 == counts.graphs
    torch._dynamo.reset()


def test_short_reason_spells_submodules_and_drops_object_ids():
    raw = "0/2: ___check_obj_id(L['cache']._modules['layers'], 140212)  # f.py:3"
    assert counters.short_reason(raw) == "L['cache'].layers is the same object as before"
    raw = "0/1: not fn._modules['0']._forward_hooks"
    assert counters.short_reason(raw) == "not fn[0]._forward_hooks"


def test_short_reason_wants_text():
    assert counters.short_reason("0/1: x.size()[0] == 2  # f.py:3") == "x.size()[0] == 2"
    with pytest.raises(TypeError, match="text must be a str"):
        counters.short_reason(None)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: models.build_mlp("cpu", seed=-1), ValueError, "seed"),
        (lambda: models.random_tokens({"vocab_size": 8}), TypeError, "size must be a GPT2Size"),
        (lambda: models.random_tokens(models.gpt2_size("cpu"), seed=1.5), ValueError, "seed"),
        (
            lambda: models.save_and_reload(models.build_gpt2(TINY, via_pretrained=False), 3),
            TypeError,
            "folder",
        ),
        (lambda: env.hardware_name("tpu"), ValueError, "device"),
        (lambda: env.machine_load(0), ValueError, "sample_s"),
        (lambda: env.setup_notebook("gpu"), ValueError, "device"),
    ],
)
def test_bad_input_names_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


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
    assert counts.graph_breaks == 1 and counts.frames == 2
    assert moved == set(_COUNTER_KEYS), f"never moved: {sorted(set(_COUNTER_KEYS) - moved)}"


def test_transformers_floor_matches_requirements_and_says_what_to_run(monkeypatch):
    from pathlib import Path

    requirements = (Path(__file__).resolve().parent.parent / "requirements.txt").read_text()
    assert f"transformers>={env.MIN_TRANSFORMERS}\n" in requirements
    assert env.transformers_advice() is None
    for old in ("4.41.2", "not installed"):
        monkeypatch.setattr(env, "_version", lambda package, old=old: old)
        advice = env.transformers_advice()
        assert f"found {old}" in advice and f"pip install -q 'transformers>={env.MIN_TRANSFORMERS}'" in advice
        with pytest.raises(SystemExit, match="restart"):
            env.setup_notebook("cpu")
