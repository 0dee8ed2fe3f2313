"""Static-cache decoding, the bytes a decoding step reads, the cache size and the read bandwidth."""

from __future__ import annotations

import time

import pytest
import torch

from helpers import decoding
from helpers.counters import CompileCounts
from helpers.device import thread_count
from helpers.models import build_gpt2, gpt2_config, gpt2_size, random_tokens

SIZE = gpt2_size("cpu", n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=48, seq_len=8)


@pytest.fixture(scope="module")
def model():
    gpt2 = build_gpt2(SIZE, via_pretrained=False)
    gpt2.config.tie_word_embeddings = False  # varied tokens: a wrong position would show
    generator = torch.Generator().manual_seed(0)
    head = torch.randn(gpt2.lm_head.weight.shape, generator=generator)
    gpt2.lm_head.weight = torch.nn.Parameter(head)
    return gpt2


@pytest.fixture
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()  # no compiled function left alive for interpreter exit


def greedy_step(model, token, cache, positions):
    logits = model(input_ids=token, past_key_values=cache, use_cache=True, **positions).logits
    return logits[:, -1].argmax(dim=-1, keepdim=True)


# --- the cache size -------------------------------------------------------------------------


def _fake_cache_dir(root, entries):
    for i, (level, kind, size) in enumerate(entries):
        index = root / f"index{i}"
        index.mkdir()
        (index / "level").write_text(f"{level}\n")
        (index / "type").write_text(f"{kind}\n")
        (index / "size").write_text(f"{size}\n")
    return root


def test_sys_cache_takes_the_highest_data_or_unified_level(tmp_path):
    root = _fake_cache_dir(
        tmp_path,
        [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "1024K"), (3, "Unified", "32768K")],
    )
    assert decoding._sys_cache_bytes(root) == 32 * 2**20


def test_sys_cache_skips_instruction_caches_and_bad_entries(tmp_path):
    root = _fake_cache_dir(tmp_path, [(1, "Data", "48K"), (2, "Instruction", "64M"), (3, "Unified", "junk")])
    assert decoding._sys_cache_bytes(root) == 48 * 2**10
    assert decoding._sys_cache_bytes(tmp_path / "missing") is None


@pytest.mark.parametrize(
    ("text", "size"), [("32768K", 2**25), ("1M", 2**20), ("512", 512), ("2GB", 2**31), ("x", None)]
)
def test_parse_size(text, size):
    assert decoding._parse_size(text) == size


def test_last_level_cache_falls_back_to_sysconf_then_none(monkeypatch, tmp_path):
    monkeypatch.setattr(decoding, "_SYS_CACHE", tmp_path / "missing")
    monkeypatch.setattr(decoding, "_sys_cache_bytes", lambda root=tmp_path: None)
    monkeypatch.setattr(decoding.os, "sysconf_names", {"SC_LEVEL3_CACHE_SIZE": 1}, raising=False)
    monkeypatch.setattr(decoding.os, "sysconf", lambda key: 8 * 2**20, raising=False)
    assert decoding.last_level_cache_bytes("cpu") == 8 * 2**20
    monkeypatch.setattr(decoding.os, "sysconf", lambda key: 0, raising=False)
    assert decoding.last_level_cache_bytes("cpu") is None
    monkeypatch.setattr(decoding.os, "sysconf_names", {}, raising=False)
    assert decoding.last_level_cache_bytes("cpu") is None


def test_last_level_cache_on_gpus_without_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert decoding.last_level_cache_bytes("cuda") is None
    assert decoding.last_level_cache_bytes("mps") is None
    with pytest.raises(ValueError, match="device"):
        decoding.last_level_cache_bytes("tpu")


def test_working_set_past_cache(monkeypatch):
    monkeypatch.setattr(decoding, "last_level_cache_bytes", lambda device="cpu": 260 * 10**6)
    size = decoding.working_set_past_cache()
    assert size >= 4 * 260 * 10**6 and size % 2**20 == 0 and size - 4 * 260 * 10**6 < 2**20
    monkeypatch.setattr(decoding, "last_level_cache_bytes", lambda device="cpu": 32 * 2**20)
    assert decoding.working_set_past_cache() == 256 * 2**20  # the minimum
    assert decoding.working_set_past_cache(factor=16) == 512 * 2**20
    monkeypatch.setattr(decoding, "last_level_cache_bytes", lambda device="cpu": None)
    assert decoding.working_set_past_cache(minimum=2**20) == 4 * 2**20
    with pytest.raises(ValueError, match="factor"):
        decoding.working_set_past_cache(factor=0)
    with pytest.raises(ValueError, match="minimum"):
        decoding.working_set_past_cache(minimum=-1)


# --- the read bandwidth ---------------------------------------------------------------------


def test_reader_reads_the_bytes_asked_for():
    read = decoding.reader(2**20)
    assert read().item() == 2**20 / 4  # a sum of float32 ones: one element per 4 bytes
    assert read.__self__.numel() * read.__self__.element_size() == 2**20


def test_read_bandwidth_counts_the_bytes_read_and_restores_threads():
    before = torch.get_num_threads()
    result = decoding.read_bandwidth_gb_s(2**20 + 3, threads=1, warmup=1, rounds=2)
    assert torch.get_num_threads() == before
    assert result.threads == 1 and result.n_bytes == 2**20 and result.timing.n == 2  # whole float32s
    assert result.gb_s == pytest.approx(2**20 / result.timing.median / 1e9)
    assert "read of a 1 MiB buffer, 1 thread(s)" in str(result)


@pytest.mark.parametrize("n_bytes", [3, 2.0**20, True])
def test_read_bandwidth_and_reader_reject_bad_sizes(n_bytes):
    with pytest.raises(ValueError, match="n_bytes"):
        decoding.read_bandwidth_gb_s(n_bytes)
    with pytest.raises(ValueError, match="n_bytes"):
        decoding.reader(n_bytes)


def test_read_bandwidth_rejects_bad_threads_and_devices():
    with pytest.raises(ValueError, match="threads"):
        decoding.read_bandwidth_gb_s(2**10, threads=0)
    with pytest.raises(ValueError, match="device"):
        decoding.read_bandwidth_gb_s(2**10, device="tpu")
    with pytest.raises(ValueError, match="device"):
        decoding.reader(2**10, device="tpu")


# --- the bytes a decoding step reads --------------------------------------------------------


def test_decode_step_bytes_counts_rows_not_tables(model):
    parts = decoding.decode_step_bytes(model, position=40)
    d, v, layers = SIZE.n_embd, SIZE.vocab_size, SIZE.n_layer
    per_block = 12 * d * d + 13 * d  # attention and MLP weights and biases, two layer norms
    assert parts == {
        "blocks": layers * per_block * 4,
        "final_norm": 2 * d * 4,
        "lm_head": v * d * 4,
        "wte_row": d * 4,
        "wpe_row": d * 4,
        "kv_cache": 2 * layers * 40 * d * 4,
    }
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    tables = (v + SIZE.n_positions) * d * 4
    assert sum(parts.values()) == weights - tables + 2 * d * 4 + parts["kv_cache"]


def test_decode_step_bytes_scales_with_batch_and_dtype(model):
    one = decoding.decode_step_bytes(model, position=10)
    four = decoding.decode_step_bytes(model, position=10, batch=4, kv_dtype=torch.bfloat16)
    assert four["blocks"] == one["blocks"] and four["lm_head"] == one["lm_head"]
    assert four["wte_row"] == 4 * one["wte_row"]
    assert four["kv_cache"] == 4 * one["kv_cache"] // 2


def test_decode_step_bytes_counts_tied_weights_as_read():
    tied = build_gpt2(SIZE, via_pretrained=False)
    assert tied.lm_head.weight is tied.transformer.wte.weight
    parts = decoding.decode_step_bytes(tied, position=8)
    assert parts["lm_head"] == SIZE.vocab_size * SIZE.n_embd * 4  # read whole, though stored once
    assert parts["wte_row"] == SIZE.n_embd * 4


def test_decode_step_bytes_skips_non_persistent_buffers_and_counts_int8_buffers(model):
    before = decoding.decode_step_bytes(model, position=8)["blocks"]
    block = model.transformer.h[0]
    block.register_buffer("mask_cache", torch.ones(64, 64), persistent=False)
    block.register_buffer("int8_weight", torch.ones(10, 10, dtype=torch.int8))
    try:
        assert decoding.decode_step_bytes(model, position=8)["blocks"] == before + 100
    finally:
        del block.mask_cache, block.int8_weight


def test_decode_step_bytes_errors(model):
    with pytest.raises(TypeError, match="model must be a transformers GPT-2"):
        decoding.decode_step_bytes(torch.nn.Linear(2, 2), position=4)
    with pytest.raises(ValueError, match="position"):
        decoding.decode_step_bytes(model, position=0)
    with pytest.raises(ValueError, match="batch"):
        decoding.decode_step_bytes(model, position=4, batch=True)
    with pytest.raises(TypeError, match="kv_dtype"):
        decoding.decode_step_bytes(model, position=4, kv_dtype="float32")


def test_describe_step_bytes(model):
    text = decoding.describe_step_bytes(decoding.decode_step_bytes(model, position=8))
    lines = text.splitlines()
    assert len(lines) == 7 and lines[-1].startswith("total")
    assert "one row of the token embedding" in text
    with pytest.raises(ValueError, match="parts"):
        decoding.describe_step_bytes({})


# --- positions and the decoding loop --------------------------------------------------------


class _TakesCachePosition(torch.nn.Module):
    def forward(self, input_ids, cache_position=None):
        return input_ids


def test_position_inputs_follow_the_forward_signature(model):
    position = torch.tensor([5])
    with_cache = decoding.position_inputs(_TakesCachePosition(), position)
    assert set(with_cache) == {"position_ids", "cache_position"}
    assert with_cache["position_ids"].tolist() == [[5]]
    expected = {"position_ids"} | ({"cache_position"} if decoding.takes_cache_position(model) else set())
    assert set(decoding.position_inputs(model, position)) == expected
    with pytest.raises(ValueError, match="position"):
        decoding.position_inputs(model, torch.tensor(5))
    with pytest.raises(TypeError, match="model"):
        decoding.takes_cache_position(object())


def test_generate_static_matches_a_full_recompute(model):
    prompt = random_tokens(SIZE, batch=1, seq_len=6)
    sequence = prompt
    with torch.inference_mode():  # the reference: the whole sequence through the model, no cache
        for _ in range(10):
            next_token = model(sequence).logits[:, -1].argmax(dim=-1, keepdim=True)
            sequence = torch.cat([sequence, next_token], dim=1)
    result = decoding.generate_static(model, greedy_step, prompt, 10)
    assert torch.equal(result.tokens, sequence)
    assert result.n_new == 10 and len(result.step_s) == 9 and result.prefill_s > 0
    assert result.graphs_per_step == (0,) * 9


def test_generate_static_compiles_once_and_reuses_the_cache(model, fresh_dynamo):
    prompt = random_tokens(SIZE, batch=1, seq_len=6)
    eager = decoding.generate_static(model, greedy_step, prompt, 8).tokens
    compiled = torch.compile(greedy_step, backend="eager", fullgraph=True)
    cache = decoding.new_static_cache(model, 32)
    first = decoding.generate_static(model, compiled, prompt, 8, cache=cache)
    other_prompt = random_tokens(SIZE, batch=1, seq_len=9, seed=1)
    with CompileCounts() as counts:
        again = decoding.generate_static(model, compiled, other_prompt, 8, cache=cache)
    assert torch.equal(first.tokens, eager)
    assert first.graphs_per_step == (1,) + (0,) * 6
    assert counts.graphs == 0 and counts.recompilations == 0
    assert torch.equal(again.tokens, decoding.generate_static(model, greedy_step, other_prompt, 8).tokens)


def test_generate_static_errors(model):
    prompt = random_tokens(SIZE, batch=1, seq_len=6)
    with pytest.raises(TypeError, match="step"):
        decoding.generate_static(model, None, prompt, 4)
    with pytest.raises(ValueError, match="prompt"):
        decoding.generate_static(model, greedy_step, prompt[0], 4)
    with pytest.raises(ValueError, match="prompt"):
        decoding.generate_static(model, greedy_step, prompt.float(), 4)
    with pytest.raises(ValueError, match="n_new"):
        decoding.generate_static(model, greedy_step, prompt, 0)
    with pytest.raises(ValueError, match="max_len"):
        decoding.generate_static(model, greedy_step, prompt, 4, max_len=8)
    with pytest.raises(ValueError, match="cache holds 8"):
        decoding.generate_static(model, greedy_step, prompt, 4, cache=decoding.new_static_cache(model, 8))
    with pytest.raises(ValueError, match="max_len"):
        decoding.new_static_cache(model, 1)


def test_gpt2_config_is_what_the_cache_reads():
    config = gpt2_config(SIZE)
    cache = decoding.new_static_cache(type("M", (), {"config": config})(), 12)
    assert cache.layers[0].max_cache_len == 12


# --- the profile split ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("aten::mm", "matmul"),
        ("aten::addmm", "matmul"),
        ("aten::_weight_int8pack_mm", "matmul"),
        ("mkldnn::_linear_pointwise", "matmul"),
        ("mkl::_mkl_linear", "matmul"),
        ("graph_2_kernel", "matmul"),  # Inductor's C++ GEMM template, with enable_kernel_profile
        ("aoti_torch_cpu__weight_int8pack_mm", "matmul"),  # ATen's kernel, called by cpp_wrapper's C shim
        ("aoti_torch_cpu_addmm_out", "matmul"),
        ("aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu", "attention"),
        ("aoti_torch_cpu_argmax", None),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
        # a fused kernel named after the attention ops it prepares is elementwise, not attention
        ("graph_2_cpp_fused__scaled_dot_product_flash_attention_for_cpu_add_0", "fused elementwise"),
        ("graph_0_cpp_fused_add_mul_native_layer_norm_pow_tanh_3", "fused elementwise"),
        ("aten::argmax", None),
        ("## Call CompiledFxGraph abc ##", None),
        ("aten::mmx", None),
        ("aten::scaled_dot_product_attention", None),  # the eager wrapper: its kernel is counted instead
    ],
)
def test_step_time_category(name, category):
    assert decoding.step_time_category(name) == category


def test_split_step_time_per_step_and_overhead():
    events = {
        "aten::_weight_int8pack_mm": 0.20,
        "graph_0_cpp_fused_add_0": 0.02,
        "aten::_scaled_dot_product_flash_attention_for_cpu": 0.01,
        "TorchDynamo Cache Lookup": 0.005,
    }
    split = decoding.split_step_time(events, step_s=0.012, n_steps=20)
    assert split == pytest.approx(
        {"matmul": 0.010, "fused elementwise": 0.001, "attention": 0.0005, "overhead": 0.0005}
    )
    # kernels longer than the step (profiler noise): overhead is 0, never negative
    assert decoding.split_step_time({"aten::mm": 1.0}, step_s=0.01, n_steps=1)["overhead"] == 0.0


def test_split_step_time_rejects_bad_input():
    with pytest.raises(TypeError, match="event_seconds"):
        decoding.split_step_time([("aten::mm", 1.0)], step_s=0.01, n_steps=1)
    with pytest.raises(ValueError, match="n_steps"):
        decoding.split_step_time({}, step_s=0.01, n_steps=0)
    with pytest.raises(ValueError, match="step_s"):
        decoding.split_step_time({}, step_s=0, n_steps=1)
    with pytest.raises(TypeError, match="name"):
        decoding.step_time_category(None)


# --- requests timed against reads of their bytes --------------------------------------------


def test_thread_count_sets_and_restores_even_on_error():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="inside"), thread_count(1):
        assert torch.get_num_threads() == 1
        raise RuntimeError("inside")
    assert torch.get_num_threads() == before
    with thread_count(None):
        assert torch.get_num_threads() == before
    for bad in (0, 1.0, True):
        with pytest.raises(ValueError, match="threads"), thread_count(bad):
            pass


def test_timed_against_reads_shares_round_by_round_at_each_recipes_threads():
    seen_threads = []

    def request(seconds):
        def run():
            seen_threads.append(torch.get_num_threads())
            return (seconds, seconds / 2, seconds * 2)  # median: seconds

        return run

    before = torch.get_num_threads()
    recipes = {
        ("a", "one"): decoding.Recipe(request(0.004), n_bytes=2**20, threads=1),
        ("b", "one"): decoding.Recipe(request(0.002), n_bytes=2**21, threads=1),
    }
    results, memory = decoding.timed_against_reads(recipes, rounds=3, past_cache_bytes=2**22)
    assert torch.get_num_threads() == before and seen_threads == [1] * 6
    assert set(memory) == {1} and memory[1] > 0
    a, b = results[("a", "one")], results[("b", "one")]
    assert (a.tokens_s, b.tokens_s, a.spread) == (250.0, 500.0, 0.0)  # one step time each: no spread
    assert a.gb_s == pytest.approx(2**20 / 0.004 / 1e9) and b.gb_s == pytest.approx(2**21 / 0.002 / 1e9)
    for r in (a, b):  # each share is its step's rate over its own read, so they lie in its range
        assert r.share_range[0] <= r.share <= r.share_range[1]
        assert r.share == pytest.approx(r.gb_s / r.bound_gb_s, rel=r.bound_spread + 1e-9)
    table = decoding.bound_table(results, {"a": 10.0, "b": 20.0}).data
    assert "| a | one | 10.0 | 250.0 | 0% |" in table


def test_timed_against_reads_and_bound_table_reject_bad_input():
    good = decoding.Recipe(lambda: (0.001,), 2**10)
    with pytest.raises(ValueError, match="recipes"):
        decoding.timed_against_reads({})
    with pytest.raises(TypeError, match=r"recipes\['x'\] must be a Recipe"):
        decoding.timed_against_reads({"x": (lambda: (0.001,), 2**10)})
    with pytest.raises(ValueError, match="rounds"):
        decoding.timed_against_reads({"x": good}, rounds=0)
    with pytest.raises(ValueError, match="n_bytes"):
        decoding.timed_against_reads({"x": good}, past_cache_bytes=2)
    with pytest.raises(ValueError, match=r"recipes\['x'\].request\(\) must return"):
        decoding.timed_against_reads({"x": decoding.Recipe(lambda: None, 2**10)}, rounds=1)
    with pytest.raises(TypeError, match="request must be callable"):
        decoding.Recipe(0.001, 2**10)
    with pytest.raises(ValueError, match="n_bytes"):
        decoding.Recipe(lambda: (0.001,), 2.0**10)
    with pytest.raises(ValueError, match="threads"):
        decoding.Recipe(lambda: (0.001,), 2**10, threads=0)
    result = decoding.ShareOfBound(1.0, 0.0, 1.0, 1.0, 0.0, 1.0, (1.0, 1.0))
    with pytest.raises(TypeError, match=r"\(variant, recipe\)"):
        decoding.bound_table({"int8": result})
    with pytest.raises(ValueError, match="eager_tokens_s must map every variant"):
        decoding.bound_table({("int8", "default"): result}, {"float32": 1.0})


def _tiny_request():
    size = gpt2_size("cpu", n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=32, seq_len=8)
    model, prompt = build_gpt2(size, via_pretrained=False), random_tokens(size, batch=1, seq_len=4)

    def step(model, token, cache, positions):
        logits = model(input_ids=token, past_key_values=cache, use_cache=True, **positions).logits
        return logits[:, -1].argmax(dim=-1, keepdim=True)

    return model, prompt, step


def test_profiled_split_leaves_out_the_first_step():
    model, prompt, step = _tiny_request()
    calls = []

    def slow_first(model, token, cache, positions):  # a first step as slow as a compile
        calls.append(1)
        if len(calls) == 1:
            time.sleep(0.3)
        return step(model, token, cache, positions)

    split = decoding.profiled_split(lambda s: decoding.generate_static(model, s, prompt, 5), slow_first)
    assert set(split) == {"matmul", "fused elementwise", "attention", "overhead"}
    assert split["matmul"] > 0 and split["fused elementwise"] == 0  # eager: no generated kernel
    assert sum(split.values()) < 0.1  # the 0.3 s first step is not in the split


def test_profiled_split_rejects_bad_input():
    model, prompt, step = _tiny_request()
    with pytest.raises(TypeError, match="decode must be callable"):
        decoding.profiled_split(None, step)
    with pytest.raises(TypeError, match="step must be callable"):
        decoding.profiled_split(lambda s: None, 3)
    with pytest.raises(TypeError, match="Generation"):
        decoding.profiled_split(lambda s: decoding.generate_static(model, s, prompt, 3).tokens, step)
    with pytest.raises(ValueError, match="at least 2 decoding steps"):
        decoding.profiled_split(lambda s: decoding.generate_static(model, s, prompt, 2), step)


def test_ring_reads_continue_where_the_last_ended_and_wrap():
    ring = decoding.RingReads(max_bytes=400)  # 100 float32 elements, 200 in the ring
    assert ring.buffer.numel() == 200
    assert ring.spans(400) == [(0, 100)]
    assert ring.spans(200) == [(100, 150)]
    assert ring.spans(400) == [(150, 200), (0, 50)]  # wraps: two sums
    assert ring.spans(4) == [(50, 51)]
    ring.read(400)  # runs, and advances as spans does
    assert ring.position == 151
    with pytest.raises(ValueError, match="at most the ring's max_bytes"):
        ring.spans(404)
    with pytest.raises(ValueError, match="n_bytes"):
        ring.spans(2)
    with pytest.raises(ValueError, match="n_bytes"):
        decoding.RingReads(max_bytes=0)


def test_what_holds_it_back_applies_the_profile_s_shares_to_the_timed_step():
    timing = decoding.ShareOfBound(50.0, 0.1, 8.0, 16.0, 0.05, 0.5, (0.45, 0.55))  # 20 ms, 10 ms read
    split = {"matmul": 0.036, "fused elementwise": 0.0, "attention": 0.002, "overhead": 0.002}  # slowed 2x
    line = decoding.what_holds_it_back(160_000_000, split, timing)
    assert "products 90% of the step, reading at 56% of the bound" in line  # 18 ms of the 20 ms step
    assert "products 8.0 ms, the rest 2.0 ms: the kernels hold it back most" in line
    rest_heavy = {"matmul": 0.010, "fused elementwise": 0.0, "attention": 0.0, "overhead": 0.010}
    rest_line = decoding.what_holds_it_back(160_000_000, rest_heavy, timing)
    assert rest_line.endswith("the rest holds it back most")
    near = decoding.ShareOfBound(50.0, 0.1, 8.0, 16.0, 0.05, 0.6996, (0.6, 0.8))  # printed as 70%
    assert decoding.what_holds_it_back(160_000_000, split, near).endswith("near the bound")
    fast = decoding.what_holds_it_back(240_000_000, split, timing)  # a 15 ms read, products 18 ms
    assert "reading at 83%" in fast
    faster = decoding.what_holds_it_back(380_000_000, split, timing)  # the read outlasts the products
    assert "(the read's spread: 5%)" in faster and "beyond the read: products 0.0 ms" in faster
    assert "not split" in decoding.what_holds_it_back(1, dict(split, matmul=0.0), timing)
    # products and the rest 1.0 ms each beyond a 10 ms read whose rounds spread 5%: a tie
    tie = {"matmul": 0.011, "fused elementwise": 0.0, "attention": 0.0, "overhead": 0.001}
    timed = decoding.ShareOfBound(1 / 0.012, 0.1, 8.0, 16.0, 0.05, 0.5, (0.45, 0.55))
    assert decoding.what_holds_it_back(160_000_000, tie, timed).endswith(
        "about equally (within the read's spread)"
    )


def test_what_holds_it_back_rejects_bad_input():
    timing = decoding.ShareOfBound(50.0, 0.1, 8.0, 16.0, 0.05, 0.5, (0.45, 0.55))
    split = {"matmul": 0.01, "fused elementwise": 0.0, "attention": 0.0, "overhead": 0.01}
    with pytest.raises(ValueError, match="n_bytes"):
        decoding.what_holds_it_back(0, split, timing)
    with pytest.raises(TypeError, match="split must be"):
        decoding.what_holds_it_back(10, {"matmul": 0.01}, timing)
    with pytest.raises(TypeError, match="timing must be"):
        decoding.what_holds_it_back(10, split, 0.5)
