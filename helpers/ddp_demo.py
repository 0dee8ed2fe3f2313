"""A compiled ``DistributedDataParallel`` training run on CPU processes, and its launcher.

Notebook 07 calls :func:`run_ddp_demo`, which starts ``torchrun --standalone`` (``python -m
torch.distributed.run``; the OS picks a free local port) in a child process group with
``--nproc_per_node`` workers, waits with a timeout, and always ends the whole group, also when the notebook
cell fails or is interrupted. Each worker runs :func:`train_on_rank`: the course's GPT-2 in
``DistributedDataParallel`` over the ``gloo`` backend, compiled with ``torch.compile``, a few
steps on its shard of one global batch. Each rank writes its facts as JSON next to ``--out``.

Run by hand (from the repository root)::

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m helpers.ddp_demo --out /tmp/ddp.json

Importing this module starts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from helpers.cache import child_env
from helpers.guard import CODEGEN_BACKENDS, compile_support

#: Backends the demo accepts for ``torch.compile`` inside the workers.
BACKENDS = ("eager", "aot_eager", "inductor")


def shard(batch: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """Rank ``rank``'s contiguous, equal share of ``batch`` (split along the first dimension).

    Equal shares matter: DDP averages gradients over ranks, which equals the gradient of
    the whole batch's mean loss only if every rank averages over as many examples.

    Example:
        >>> shard(torch.arange(8).reshape(4, 2), rank=1, world_size=2).tolist()
        [[4, 5], [6, 7]]
    """
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise ValueError(f"world_size must be a positive int; got {world_size!r}")
    if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < world_size:
        raise ValueError(f"rank must be an int in [0, {world_size}); got {rank!r}")
    if batch.ndim == 0 or batch.shape[0] % world_size:
        raise ValueError(f"batch's first dimension must be divisible by world_size={world_size}")
    per_rank = batch.shape[0] // world_size
    return batch[rank * per_rank : (rank + 1) * per_rank]


@dataclass(frozen=True)
class DDPResult:
    """What a DDP demo run reports (from rank 0, except where a field says otherwise).

    ``losses``: the loss of the global batch at each step (the mean of the ranks' losses);
    ``subgraphs``: how many graphs the backend compiled on each rank (the pieces DDP's graph
    split produced); ``dynamo_graphs``: graphs Dynamo captured before the split;
    ``subgraphs_without_split``: the same count per rank with ``optimize_ddp=False`` (if asked
    for); ``first_step_s``: rank 0's first step, compile included; ``process_s``: the launch.

    Example:
        >>> DDPResult(2, (5.0,), (3, 3), (1, 1), 1, 1.0, 2.0, "").subgraphs
        (3, 3)
    """

    world_size: int
    losses: tuple[float, ...]
    subgraphs: tuple[int, ...]
    subgraphs_without_split: tuple[int, ...] | None
    dynamo_graphs: int
    first_step_s: float
    process_s: float
    log: str


def train_on_rank(
    *,
    steps: int,
    bucket_cap_mb: float,
    backend: str,
    optimize_ddp: bool,
    size_overrides: dict[str, int],
    seed: int = 0,
) -> dict[str, Any]:
    """One worker's part: compiled DDP training on this rank's shard of the global batch.

    Runs inside a worker started by ``torchrun`` after :func:`main` has initialized the
    process group. Returns this rank's facts (:func:`main` writes them to a file).

    Example (arguments are checked before anything starts):
        >>> train_on_rank(steps=1, bucket_cap_mb=1.0, backend="tvm", optimize_ddp=True, size_overrides={})
        Traceback (most recent call last):
        ...
        ValueError: backend must be one of 'eager', 'aot_eager', 'inductor'; got 'tvm'
    """
    _check_run_arguments(steps=steps, bucket_cap_mb=bucket_cap_mb, backend=backend)
    import torch.distributed as dist
    from torch._dynamo.testing import CompileCounterWithBackend
    from torch.nn.parallel import DistributedDataParallel as DDP

    from helpers.counters import CompileCounts
    from helpers.models import build_gpt2, gpt2_size, random_tokens

    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch._dynamo.config.optimize_ddp = optimize_ddp  # True (the default): split at DDP's buckets

    size = gpt2_size("cpu", **size_overrides)
    # The same weights on every rank (DDP also broadcasts rank 0's); no dropout, so the losses
    # can be compared with one process's.
    model = build_gpt2(size, device="cpu", seed=seed, via_pretrained=False, dropout=0.0).train()
    ddp_model = DDP(model, bucket_cap_mb=bucket_cap_mb)
    optimizer = torch.optim.AdamW(ddp_model.parameters(), lr=1e-3)

    pieces = CompileCounterWithBackend(backend)  # the backend, called once per piece of the split graph
    compiled_model = torch.compile(ddp_model, backend=pieces)

    tokens = shard(random_tokens(size, seed=seed), rank, world_size)  # this rank's half of the batch
    losses, first_step_s = [], 0.0
    with CompileCounts() as counts:
        for step in range(steps):
            start = time.perf_counter()
            loss = compiled_model(input_ids=tokens, labels=tokens).loss
            loss.backward()  # DDP all-reduces (averages) the gradients, bucket by bucket
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if step == 0:
                first_step_s = time.perf_counter() - start
            global_loss = loss.detach().clone()
            dist.all_reduce(global_loss)  # the sum of the ranks' losses ...
            losses.append(global_loss.item() / world_size)  # ... / ranks = the global batch's mean loss
    return {
        "rank": rank,
        "world_size": world_size,
        "losses": losses,
        "subgraphs": pieces.frame_count,
        "dynamo_graphs": counts.graphs,
        "first_step_s": first_step_s,
    }


def main(argv: list[str] | None = None) -> None:
    """Entry point of each worker: parse arguments, train, write this rank's facts as JSON.

    ``torchrun`` starts it through ``python -m helpers.ddp_demo``; see the module docstring.

    Example (arguments are checked before the process group starts):
        >>> main(["--out", "result.json", "--steps", "0"])
        Traceback (most recent call last):
        ...
        ValueError: steps must be a positive int; got 0
    """
    import gc
    from datetime import timedelta

    import torch.distributed as dist

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--out", required=True, help="each rank writes its facts to <out>.rank<N> (JSON)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0)
    parser.add_argument("--backend", choices=BACKENDS, default="aot_eager")
    parser.add_argument("--no-optimize-ddp", action="store_true", help="one graph, no split at buckets")
    parser.add_argument(
        "--also-without-split", action="store_true", help="then one step with optimize_ddp=False, to compare"
    )
    parser.add_argument("--size", default="{}", help="GPT2Size overrides as JSON, e.g. '{\"n_layer\": 2}'")
    args = parser.parse_args(argv)
    _check_run_arguments(steps=args.steps, bucket_cap_mb=args.bucket_cap_mb, backend=args.backend)

    # A rank that waits for a dead peer gives up after 2 minutes (the default is 30).
    dist.init_process_group("gloo", timeout=timedelta(minutes=2))
    try:
        common = dict(
            bucket_cap_mb=args.bucket_cap_mb, backend=args.backend, size_overrides=json.loads(args.size)
        )
        facts = train_on_rank(steps=args.steps, optimize_ddp=not args.no_optimize_ddp, **common)
        if args.also_without_split:
            torch._dynamo.reset()  # compile afresh, with DDPOptimizer off
            unsplit = train_on_rank(steps=1, optimize_ddp=False, **common)
            facts["subgraphs_without_split"] = unsplit["subgraphs"]
        dist.barrier()  # every rank's communication is done (and its buffers released)
    finally:
        # DDP's reducer keeps the process group alive, and Dynamo's caches keep the DDP module:
        # free them now, while Python is fully alive. Left to interpreter shutdown, gloo's
        # threads can deadlock releasing tensors that need the GIL.
        torch._dynamo.reset()
        gc.collect()
        dist.destroy_process_group()
    out = Path(args.out)
    (out.parent / f"{out.name}.rank{facts['rank']}").write_text(json.dumps(facts), encoding="utf-8")


def _check_run_arguments(*, steps: int, bucket_cap_mb: float, backend: str) -> None:
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be a positive int; got {steps!r}")
    if not isinstance(bucket_cap_mb, (int, float)) or isinstance(bucket_cap_mb, bool) or bucket_cap_mb < 1:
        # DDPOptimizer requires buckets at least as big as DDP's first bucket (1 MB).
        raise ValueError(f"bucket_cap_mb must be a number of megabytes >= 1; got {bucket_cap_mb!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}; got {backend!r}")


def _end_process_group(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """End ``process`` and every process in its group (the ``torchrun`` workers): TERM, then KILL.

    Safe to call after a clean exit: an empty group is left alone.
    """
    if os.name != "posix":  # Windows: kill the launcher's process tree
        if process.poll() is None:
            subprocess.run(
                ["taskkill", "/F", "/T", "/PID", str(process.pid)], capture_output=True, check=False
            )
            process.wait(timeout=grace_s)
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)  # the group's id is the launcher's pid (start_new_session)
        except (ProcessLookupError, PermissionError):
            return  # nobody left in the group
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            process.poll()  # reap the launcher once it exits
            try:
                os.killpg(process.pid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.1)


def run_ddp_demo(
    *,
    nproc: int = 2,
    steps: int = 3,
    bucket_cap_mb: float = 25.0,
    backend: str = "aot_eager",
    optimize_ddp: bool = True,
    also_without_split: bool = False,
    size_overrides: dict[str, int] | None = None,
    timeout_s: float = 150.0,
) -> DDPResult:
    """Launch :func:`train_on_rank` on ``nproc`` local CPU processes with ``torchrun``; return rank 0's facts.

    The launcher (``torchrun --standalone``: one node, a port the OS picks) runs in its own process group, in
    :func:`launcher_env` (one OpenMP thread per worker; ``USE_LIBUV=0`` on Windows), with its
    output captured (``DDPResult.log``). With ``also_without_split`` each worker then compiles
    once more with ``torch._dynamo.config.optimize_ddp = False`` and counts the pieces again.
    However the call ends (success, error, timeout, interrupt), no child process outlives it.
    Raises ``RuntimeError`` with the end of the log if the run fails, and before starting
    anything if ``backend="inductor"`` and the guard says Inductor cannot build kernels here
    (``aot_eager`` and ``eager`` need no compiler and run wherever Dynamo does).

    A real run takes 20-40 s on 2 cores (tests/test_ddp_demo.py runs one), for instance
    ``run_ddp_demo(nproc=2, steps=2, size_overrides={"n_layer": 1})``. Bad input fails at once:

    Example:
        >>> run_ddp_demo(nproc=0)
        Traceback (most recent call last):
        ...
        ValueError: nproc must be a positive int; got 0
    """
    if not isinstance(nproc, int) or isinstance(nproc, bool) or nproc < 1:
        raise ValueError(f"nproc must be a positive int; got {nproc!r}")
    _check_run_arguments(steps=steps, bucket_cap_mb=bucket_cap_mb, backend=backend)
    if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or timeout_s <= 0:
        raise ValueError(f"timeout_s must be a positive number of seconds; got {timeout_s!r}")
    overrides = dict(size_overrides or {})

    if backend in CODEGEN_BACKENDS:  # the workers would build kernels: ask the guard first
        verdict = compile_support("cpu", backend)
        if not verdict.ok:
            raise RuntimeError(f"backend={backend!r} cannot build kernels here: {verdict.reason}")
    env = launcher_env()
    with tempfile.TemporaryDirectory(prefix="course-ddp-") as folder:
        out = Path(folder) / "result.json"
        command = [
            sys.executable, "-m", "torch.distributed.run",
            "--standalone", f"--nproc_per_node={nproc}",
            "-m", "helpers.ddp_demo",
            "--out", str(out), "--steps", str(steps), "--bucket-cap-mb", str(bucket_cap_mb),
            "--backend", backend, "--size", json.dumps(overrides),
        ]  # fmt: skip
        if not optimize_ddp:
            command.append("--no-optimize-ddp")
        if also_without_split:
            command.append("--also-without-split")
        start = time.perf_counter()
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=folder,
            start_new_session=(os.name == "posix"),
            creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0),
        )
        try:
            log, _ = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _end_process_group(process)
            log, _ = process.communicate()
            raise RuntimeError(
                f"the DDP run took more than {timeout_s} s and was stopped:\n{_tail(log)}"
            ) from None
        finally:
            # Also on an error or an interrupt (KeyboardInterrupt) in this cell: no worker survives.
            _end_process_group(process)
        process_s = time.perf_counter() - start
        if process.returncode != 0:
            raise RuntimeError(f"the DDP run failed with exit code {process.returncode}:\n{_tail(log)}")
        ranks = [
            json.loads((out.parent / f"{out.name}.rank{r}").read_text(encoding="utf-8")) for r in range(nproc)
        ]
    first = ranks[0]
    return DDPResult(
        world_size=first["world_size"],
        losses=tuple(first["losses"]),
        subgraphs=tuple(r["subgraphs"] for r in ranks),
        subgraphs_without_split=(
            tuple(r["subgraphs_without_split"] for r in ranks) if also_without_split else None
        ),
        dynamo_graphs=first["dynamo_graphs"],
        first_step_s=first["first_step_s"],
        process_s=process_s,
        log=log,
    )


def launcher_env(windows: bool | None = None) -> dict[str, str]:
    """The environment ``torchrun`` and its workers get: this one, plus what the demo needs.

    One OpenMP thread per worker (the cores are shared), this package importable, and on
    Windows (``windows=None`` asks ``os.name``) ``USE_LIBUV=0``: Windows wheels build the
    ``TCPStore`` without libuv, and torchrun's store asks for libuv unless told otherwise
    (``torch/distributed/elastic/utils/distributed.py`` reads ``USE_LIBUV``, default ``"1"``).

    Example:
        >>> launcher_env(windows=True)["USE_LIBUV"], launcher_env(windows=True)["OMP_NUM_THREADS"]
        ('0', '1')
    """
    extra = {"OMP_NUM_THREADS": "1"}  # torchrun would set it too, with a notice on stderr
    if os.name == "nt" if windows is None else windows:
        extra["USE_LIBUV"] = "0"
    return child_env(extra)


def _tail(log: str | None, lines: int = 15) -> str:
    """The end of the launcher's log, after the workers' last error lines (if any)."""
    all_lines = (log or "").strip().splitlines()
    worker_lines = [line for line in all_lines if line.startswith("[rank") and "]:W" not in line[:12]]
    shown = (
        worker_lines[-2 * lines :] + ["..."] + all_lines[-lines:] if worker_lines else all_lines[-2 * lines :]
    )
    return "\n".join(shown)


if __name__ == "__main__":
    main()
