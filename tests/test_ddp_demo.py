"""The DDP demo with its launcher (helpers.ddp_demo), and the dropout-free GPT-2 it trains."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

from helpers import ddp_demo
from helpers.models import build_gpt2, gpt2_size, random_tokens

TINY = dict(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=16, seq_len=8, batch=4)
# Small, but over 2 MB of parameters, so that 1 MB buckets split it.
DDP_SIZE = dict(n_layer=2, n_embd=128, n_head=2, vocab_size=1024, n_positions=16, seq_len=8, batch=4)


def test_gpt2_without_dropout_is_reproducible_in_train_mode():
    size = gpt2_size("cpu", **TINY)
    first = build_gpt2(size, seed=3, dropout=0.0, via_pretrained=False).train()
    second = build_gpt2(size, seed=3, dropout=0.0, via_pretrained=False).train()
    assert first.training and first.loss_type == "ForCausalLM"
    config = first.config
    assert (config.resid_pdrop, config.embd_pdrop, config.attn_pdrop) == (0.0, 0.0, 0.0)
    assert all(torch.equal(a, b) for a, b in zip(first.parameters(), second.parameters(), strict=True))
    tokens = random_tokens(size)
    # No dropout: two forward passes in train mode give the same loss.
    losses = [first(input_ids=tokens, labels=tokens).loss for _ in range(2)]
    assert torch.equal(*losses)
    # GPT-2's own dropout (0.1) draws random numbers: two passes differ.
    dropping = build_gpt2(size, seed=3, via_pretrained=False).train()
    assert dropping.config.attn_pdrop == 0.1
    assert not torch.equal(*[dropping(input_ids=tokens, labels=tokens).loss for _ in range(2)])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"dropout": 1.0}, "dropout"), ({"dropout": "0"}, "dropout"), ({"seed": -1}, "seed")],
)
def test_build_gpt2_rejects_bad_dropout_and_seed(kwargs, match):
    with pytest.raises(ValueError, match=match):
        build_gpt2(gpt2_size("cpu", **TINY), via_pretrained=False, **kwargs)


def test_shard_splits_into_equal_parts():
    batch = torch.arange(12).reshape(6, 2)
    parts = [ddp_demo.shard(batch, rank, 3) for rank in range(3)]
    assert torch.equal(torch.cat(parts), batch)
    for kwargs, match in [
        ({"rank": 3, "world_size": 3}, "rank"),
        ({"rank": 0, "world_size": 0}, "world_size"),
        ({"rank": 0, "world_size": 4}, "divisible"),
    ]:
        with pytest.raises(ValueError, match=match):
            ddp_demo.shard(batch, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"nproc": 0}, "nproc"),
        ({"steps": 0}, "steps"),
        ({"bucket_cap_mb": 0.5}, "bucket_cap_mb"),
        ({"backend": "tvm"}, "backend"),
        ({"timeout_s": -1}, "timeout_s"),
    ],
)
def test_run_ddp_demo_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ddp_demo.run_ddp_demo(**kwargs)


def test_launcher_env_turns_libuv_off_on_windows_only(monkeypatch):
    monkeypatch.delenv("USE_LIBUV", raising=False)
    assert ddp_demo.launcher_env(windows=True)["USE_LIBUV"] == "0"  # Windows wheels have no libuv
    env = ddp_demo.launcher_env(windows=False)
    assert "USE_LIBUV" not in env and env["OMP_NUM_THREADS"] == "1"
    assert str(Path(ddp_demo.__file__).resolve().parent.parent) in env["PYTHONPATH"].split(os.pathsep)


def test_run_ddp_demo_asks_the_guard_before_inductor(monkeypatch):
    monkeypatch.setenv("COURSE_DISABLE_COMPILE", "1")
    with pytest.raises(RuntimeError, match="COURSE_DISABLE_COMPILE"):
        ddp_demo.run_ddp_demo(backend="inductor")  # refused before any process starts


def _demo_processes() -> set[int]:
    """Pids of running DDP demo workers and launchers (Linux: read from /proc)."""
    pids = set()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes()
        except OSError:
            continue
        if b"helpers.ddp_demo" in text and b"pytest" not in text:
            pids.add(int(cmdline.parent.name))
    return pids


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@linux_only
def test_ddp_on_two_processes_matches_one_process_and_leaves_no_process():
    before = _demo_processes()
    result = ddp_demo.run_ddp_demo(
        nproc=2, steps=2, bucket_cap_mb=1, backend="eager", also_without_split=True, size_overrides=DDP_SIZE
    )
    assert _demo_processes() <= before
    assert result.world_size == 2 and result.dynamo_graphs == 1
    assert result.subgraphs[0] == result.subgraphs[1] > 1
    assert result.subgraphs_without_split == (1, 1)

    size = gpt2_size("cpu", **DDP_SIZE)
    model = build_gpt2(size, seed=0, via_pretrained=False, dropout=0.0).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = random_tokens(size, seed=0)
    losses = []
    for _ in range(2):
        loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    torch.testing.assert_close(torch.tensor(result.losses), torch.tensor(losses), rtol=1e-4, atol=1e-4)


@linux_only
def test_a_timed_out_run_leaves_no_process():
    before = _demo_processes()
    with pytest.raises(RuntimeError, match="was stopped"):
        ddp_demo.run_ddp_demo(nproc=2, steps=1, size_overrides=TINY, timeout_s=1.5)
    assert _demo_processes() <= before
