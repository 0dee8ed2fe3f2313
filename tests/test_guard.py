"""The guard on simulated platforms: torch version, Python, Windows, toolchain, devices."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import warnings
from pathlib import Path

import pytest
import torch

from helpers import guard
from helpers.guard import CompileSkippedWarning, compile_support, maybe_compile

# As they are before any test patches them.
REAL_PATH = os.environ.get("PATH", "")
REAL_GXX = shutil.which("g++")
REAL_GET_PATH = sysconfig.get_path


def fake_compiler(path, works=True):
    """A compiler that compiles (exit 0) or a stub that exists and fails, like a Mac's clang++
    without the command-line tools."""
    failing = 'echo "xcrun: error: invalid active developer path" >&2; exit 1'
    path.write_text("#!/bin/sh\n" + ("exit 0" if works else failing) + "\n")
    path.chmod(0o755)
    return path


def python_headers_in(monkeypatch, folder):
    """Make sysconfig (where Inductor and the guard look for Python.h) name ``folder``."""
    real_get_path = sysconfig.get_path
    folder.mkdir(exist_ok=True)

    def get_path(name, *args, **kwargs):
        return str(folder) if name == "include" else real_get_path(name, *args, **kwargs)

    monkeypatch.setattr(sysconfig, "get_path", get_path)
    return folder


@pytest.fixture
def linux_with_compiler(monkeypatch, tmp_path):
    """A Linux machine whose PATH holds only a working fake g++, with Python's headers (and no
    CUDA, no MPS)."""
    from torch._inductor import config as inductor_config

    fake_compiler(tmp_path / "g++")
    fake_compiler(tmp_path / "gcc")  # the C compiler Triton builds its launchers with
    (python_headers_in(monkeypatch, tmp_path / "include") / "Python.h").write_text("/* a stand-in */\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv(guard.DISABLE_ENV_VAR, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(torch, "__version__", "2.13.0+cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    # Inductor's own search list, as it is without $CXX on Linux.
    with inductor_config.patch({"cpp.cxx": (None, "g++")}):
        yield tmp_path


def test_supported_cpu_says_why(linux_with_compiler):
    verdict = compile_support("cpu")
    assert verdict.ok and bool(verdict)
    assert "2.13.0" in verdict.reason and "cpu" in verdict.reason


def test_default_device_is_the_best_available(linux_with_compiler):
    assert compile_support().device == "cpu"


@pytest.mark.parametrize("old", ["1.13.1", "1.9.0+cu111", "1.14.0a0+gitabc"])
def test_old_torch_is_refused(linux_with_compiler, monkeypatch, old):
    monkeypatch.setattr(torch, "__version__", old)
    verdict = compile_support("cpu")
    assert not verdict.ok and "torch 2.0" in verdict.reason


@pytest.mark.parametrize(
    ("version", "base"), [("2.6.0a0+ecf3bae", "2.6.0"), ("2.1.0a0+git", "2.1.0"), ("2.13.0+cpu", "2.13.0")]
)
def test_pre_releases_count_as_their_base_version(linux_with_compiler, monkeypatch, version, base):
    # NGC containers ship 2.6.0a0+<hash>: a build of the 2.6 branch, with 2.6's features.
    monkeypatch.setattr(torch, "__version__", version)
    assert guard.torch_version() == guard.parse_version(base)
    assert compile_support("cpu").ok


@pytest.mark.parametrize("bad", ["", "two", "2.x"])
def test_parse_version_names_the_argument(bad):
    with pytest.raises(ValueError, match="version must be a version string"):
        guard.parse_version(bad)


def test_version_is_parsed_not_compared_as_a_string(linux_with_compiler, monkeypatch):
    monkeypatch.setattr(torch, "__version__", "10.0.0")  # "10.0.0" >= "2" is False as strings
    assert compile_support("cpu").ok


@pytest.mark.parametrize(
    ("version", "ok"),
    [
        ("2.1.2", False),
        ("2.4.1", False),
        # Inductor on Windows landed in July 2024, during 2.5's development (pytorch#131286): an
        # earlier 2.5 snapshot still raised "Windows not yet supported for inductor".
        ("2.5.0a0+git1234567", False),
        ("2.5.0", True),
        ("2.6.0a0+ecf3bae", True),
        ("2.13.0", True),
    ],
)
def test_windows_by_torch_version(linux_with_compiler, monkeypatch, version, ok):
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(torch, "__version__", version)
    # shutil.which follows Windows rules once sys.platform is win32: cl is found as cl.EXE.
    monkeypatch.setenv("PATHEXT", ".EXE")
    fake_compiler(linux_with_compiler / "cl.EXE")
    verdict = compile_support("cpu")
    assert verdict.ok is ok, verdict.reason
    if not ok:
        assert "Windows" in verdict.reason and "2.5" in verdict.reason


def test_windows_without_msvc(linux_with_compiler, monkeypatch):
    monkeypatch.setattr(sys, "platform", "win32")
    verdict = compile_support("cpu")
    assert not verdict.ok and "Visual Studio" in verdict.reason


def test_no_cpp_compiler(linux_with_compiler, monkeypatch, tmp_path_factory):
    monkeypatch.setenv("PATH", str(tmp_path_factory.mktemp("empty")))
    verdict = compile_support("cpu")
    assert not verdict.ok and "C++ compiler" in verdict.reason
    # The debugging backends generate no code, so they need no compiler.
    assert compile_support("cpu", backend="aot_eager").ok


def test_follows_inductors_own_compiler_setting(linux_with_compiler, monkeypatch, tmp_path_factory):
    # Inductor reads $CXX into torch._inductor.config.cpp.cxx; the guard asks that, not its own list.
    from torch._inductor import config as inductor_config

    elsewhere = tmp_path_factory.mktemp("elsewhere")
    compiler = fake_compiler(elsewhere / "my-c++")
    monkeypatch.setenv("PATH", str(tmp_path_factory.mktemp("empty")))
    with inductor_config.patch({"cpp.cxx": (None, str(compiler))}):
        assert compile_support("cpu").ok
    with inductor_config.patch({"cpp.cxx": (None, str(elsewhere / "missing-c++"))}):
        verdict = compile_support("cpu")
    assert not verdict.ok and "missing-c++ is not on the PATH" in verdict.reason


def test_no_python_headers(linux_with_compiler, monkeypatch, tmp_path_factory):
    # A venv on Debian's or Ubuntu's Python without python3.X-dev: the compiler works, and every
    # kernel Inductor builds for the CPU (a Python extension module) fails on #include <Python.h>.
    empty = python_headers_in(monkeypatch, tmp_path_factory.mktemp("no-headers"))
    verdict = compile_support("cpu")
    assert not verdict.ok
    assert "Python.h" in verdict.reason and str(empty) in verdict.reason
    assert f"python{sys.version_info[0]}.{sys.version_info[1]}-dev" in verdict.reason
    assert "\n" not in verdict.reason
    assert compile_support("cpu", backend="aot_eager").ok  # no kernels, no headers needed


@pytest.mark.skipif(REAL_GXX is None, reason="needs a real g++")
def test_the_probe_compiles_against_python_h(linux_with_compiler, monkeypatch, tmp_path_factory):
    # With a real compiler: the probe includes Python.h from sysconfig's include path, as Inductor's
    # kernels do (-I that folder), so a header there that does not compile makes the verdict a no.
    monkeypatch.setenv("PATH", REAL_PATH)  # the real g++, and the assembler it runs
    monkeypatch.setattr(sysconfig, "get_path", REAL_GET_PATH)
    if (Path(REAL_GET_PATH("include")) / "Python.h").is_file():
        assert compile_support("cpu").ok
    broken = python_headers_in(monkeypatch, tmp_path_factory.mktemp("broken-headers"))
    (broken / "Python.h").write_text("#error this Python.h is the one the probe included\n")
    verdict = compile_support("cpu")
    assert not verdict.ok
    assert "includes Python.h" in verdict.reason and "the one the probe included" in verdict.reason


def test_a_compiler_that_exists_but_fails_is_a_no(linux_with_compiler):
    fake_compiler(linux_with_compiler / "g++", works=False)
    verdict = compile_support("cpu")
    assert not verdict.ok
    assert "failed to compile" in verdict.reason and "invalid active developer path" in verdict.reason
    assert "xcode-select --install" in verdict.reason


def test_the_compiler_probe_runs_once(linux_with_compiler, monkeypatch):
    calls = []
    real_run = guard.subprocess.run
    monkeypatch.setattr(guard.subprocess, "run", lambda *a, **k: calls.append(a) or real_run(*a, **k))
    assert compile_support("cpu").ok and compile_support("cpu").ok
    assert len(calls) == 1


def test_cuda_asked_for_on_a_cpu_only_build(linux_with_compiler, monkeypatch):
    def no_cuda_api(*args, **kwargs):
        raise AssertionError("the guard called a CUDA API that raises on CPU-only builds")

    monkeypatch.setattr(torch.cuda, "get_device_capability", no_cuda_api)
    monkeypatch.setattr(torch.cuda, "get_device_name", no_cuda_api)
    monkeypatch.setattr(torch.version, "cuda", None)
    verdict = compile_support("cuda")
    assert not verdict.ok and verdict.device == "cuda"
    assert "no CUDA support" in verdict.reason


def test_cuda_without_triton(linux_with_compiler, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(guard.importlib.util, "find_spec", lambda name: None)
    verdict = compile_support("cuda:0")
    assert not verdict.ok and "Triton" in verdict.reason


def test_old_gpu_is_refused(linux_with_compiler, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(guard.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (6, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla P100")
    verdict = compile_support("cuda")
    assert not verdict.ok and "7.0" in verdict.reason and "P100" in verdict.reason


def test_gpu_with_triton_but_no_c_compiler(linux_with_compiler, monkeypatch):
    (linux_with_compiler / "gcc").unlink()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(guard.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 9))
    verdict = compile_support("cuda")
    assert not verdict.ok and "C compiler" in verdict.reason and "gcc or clang" in verdict.reason
    monkeypatch.setenv("CC", "/opt/cc")  # Triton takes $CC as it is
    assert compile_support("cuda").ok


def test_modern_gpu_with_triton(linux_with_compiler, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(guard.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 9))
    assert compile_support("cuda").ok
    assert compile_support(torch.device("cuda", 0)).ok


def test_gpu_without_python_headers(linux_with_compiler, monkeypatch, tmp_path_factory):
    # Triton's launchers are C files that include Python.h: a GPU needs the headers as a CPU does.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(guard.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 9))
    python_headers_in(monkeypatch, tmp_path_factory.mktemp("no-headers"))
    verdict = compile_support("cuda")
    assert not verdict.ok and "Python.h" in verdict.reason and "Triton" in verdict.reason


def test_python_is_asked_of_dynamo_on_every_release(linux_with_compiler, monkeypatch):
    # torch 2.8 refuses a free-threaded Python before 3.13.3, which no table of newest versions says.
    import torch._dynamo.eval_frame as eval_frame

    def refuse():
        raise RuntimeError("Python < 3.13.3 built with GIL disabled is not supported")

    monkeypatch.setattr(eval_frame, "check_if_dynamo_supported", refuse)
    monkeypatch.setattr(torch, "__version__", "2.8.0")
    verdict = compile_support("cpu")
    assert not verdict.ok and "GIL disabled" in verdict.reason


def test_mps_missing_and_too_old(linux_with_compiler, monkeypatch):
    assert not compile_support("mps").ok
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    # Below the MPS floor (2.13: a reduction over a dynamic size fails in Metal codegen before it),
    # including the course's own floor, 2.8: Inductor declined, with the reason and what to do.
    for old in ("2.6.0", "2.8.0", "2.9.1", "2.11.0", "2.12.0a0+git"):
        monkeypatch.setattr(torch, "__version__", old)
        verdict = compile_support("mps")
        assert not verdict.ok and verdict.device == "mps", old
        assert guard.MIN_TORCH_MPS in verdict.reason and "dynamic size" in verdict.reason
        assert f"{guard.DEVICE_ENV_VAR}=cpu" in verdict.reason
        # Dynamo-level backends generate no Metal code: they stay allowed.
        assert compile_support("mps", backend="aot_eager").ok
    for new in ("2.13.0", "2.15.0"):
        monkeypatch.setattr(torch, "__version__", new)
        assert compile_support("mps").ok
        assert "Metal kernels" in compile_support("mps").reason
    assert guard.parse_version(guard.MIN_TORCH_MPS) > guard.parse_version(guard.MIN_TORCH)


@pytest.mark.parametrize(
    ("torch_version", "python", "ok"),
    [
        ("2.0.1", (3, 11, 0), False),
        ("2.1.0", (3, 11, 0), True),
        ("2.3.0", (3, 12, 0), False),
        ("2.5.0", (3, 12, 0), True),
        ("2.13.0", (3, 15, 0), False),
    ],
)
def test_python_supported_by_dynamo(linux_with_compiler, monkeypatch, torch_version, python, ok):
    monkeypatch.setattr(torch, "__version__", torch_version)
    monkeypatch.setattr(sys, "version_info", python)
    verdict = compile_support("cpu")
    assert verdict.ok is ok, verdict.reason
    if not ok:
        assert "Python 3." in verdict.reason


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
def test_escape_hatch(linux_with_compiler, monkeypatch, value):
    monkeypatch.setenv(guard.DISABLE_ENV_VAR, value)
    verdict = compile_support("cpu")
    assert not verdict.ok and guard.DISABLE_ENV_VAR in verdict.reason


def test_escape_hatch_off_values(linux_with_compiler, monkeypatch):
    monkeypatch.setenv(guard.DISABLE_ENV_VAR, "0")
    assert compile_support("cpu").ok


@pytest.mark.parametrize("bad", ["tpu", "gpu", "", "xla:0"])
def test_unknown_device_names_the_accepted_ones(bad):
    with pytest.raises(ValueError, match="'cpu', 'cuda', 'mps'"):
        compile_support(bad)


@pytest.mark.parametrize("bad", [0, 1.5, ["cpu"]])
def test_device_of_the_wrong_type(bad):
    with pytest.raises(TypeError, match="device must be"):
        compile_support(bad)


def test_bad_backend_name():
    with pytest.raises(ValueError, match="backend"):
        compile_support("cpu", backend="")


def test_maybe_compile_compiles_where_supported(linux_with_compiler):
    from helpers.counters import CompileCounts

    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileSkippedWarning)
        compiled = maybe_compile(lambda x: x + 1, device="cpu", backend="eager")
    with CompileCounts() as counts:
        assert int(compiled(torch.tensor(1))) == 2
    assert counts.frames == 1, "maybe_compile fell back to eager where it should compile"
    torch._dynamo.reset()


def test_marked_cells_are_skipped_with_the_reason():
    no = guard.CompileSupport(False, "No C++ compiler: install g++.", "cpu")
    yes = guard.CompileSupport(True, "fine.", "cpu")
    cell = ["# NBVAL_IGNORE_OUTPUT\n", "# requires: inductor: timing the compiled model\n", "x = 1\n"]
    skipped = guard._marked_cell_skipper(no)(cell)
    namespace: dict = {}
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()) as printed:
        exec("".join(skipped), namespace)
    assert "x" not in namespace
    assert printed.getvalue() == (
        "Skipped (needs Inductor): timing the compiled model. Why: No C++ compiler: install g++.\n"
    )
    assert guard._marked_cell_skipper(yes)(cell) == cell
    assert guard._marked_cell_skipper(no)(["x = 1  # requires: inductor\n"]) == [
        "x = 1  # requires: inductor\n"
    ]


def test_cpu_marked_cells_follow_the_cpus_verdict():
    # A GPU machine without a C++ compiler: Triton works, the cells that compile CPU tensors skip.
    gpu = guard.CompileSupport(True, "Triton kernels.", "cuda")
    no_cpu = guard.CompileSupport(False, "No C++ compiler: install g++.", "cpu")
    cell = ["# requires: inductor-cpu: the planted bugs, compiled on the CPU\n", "x = 1\n"]
    gpu_cell = ["# requires: inductor: the GPU model\n", "x = 1\n"]
    assert guard._marked_cell_skipper(gpu, no_cpu)(gpu_cell) == gpu_cell
    assert guard._marked_cell_skipper(gpu, no_cpu)(cell) == [
        "print('Skipped (needs Inductor): the planted bugs, compiled on the CPU. "
        "Why: No C++ compiler: install g++.')\n"
    ]
    assert guard._marked_cell_skipper(no_cpu)(cell)[0].startswith("print('Skipped")  # on a CPU: one verdict
    assert guard._marked_cell_skipper(gpu, gpu)(cell) == cell


def test_skip_marked_cells_wants_a_verdict():
    with pytest.raises(TypeError, match="verdict must be a CompileSupport"):
        guard.skip_marked_cells(True)
    with pytest.raises(TypeError, match="cpu_verdict must be a CompileSupport"):
        guard.skip_marked_cells(guard.CompileSupport(True, "fine.", "cpu"), "cpu")


def test_maybe_compile_falls_back_with_one_warning(linux_with_compiler, monkeypatch):
    monkeypatch.setenv(guard.DISABLE_ENV_VAR, "1")

    def double(x):
        return x * 2

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = maybe_compile(double, device="cpu")
    assert result is double
    assert len(caught) == 1 and issubclass(caught[0].category, CompileSkippedWarning)
    assert guard.DISABLE_ENV_VAR in str(caught[0].message)


def test_maybe_compile_rejects_what_cannot_be_compiled():
    with pytest.raises(TypeError, match="model_or_fn"):
        maybe_compile(42)


def test_verdict_reads_the_platform_when_called(linux_with_compiler, monkeypatch):
    assert compile_support("cpu").ok
    monkeypatch.setattr(torch, "__version__", "1.12.0")
    assert not compile_support("cpu").ok
