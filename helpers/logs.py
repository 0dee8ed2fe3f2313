"""Read what torch logs (``TORCH_LOGS`` artifacts) as text, instead of letting it reach stderr.

Torch's log artifacts (graph breaks, guards, recompilations) are worth reading in a lesson,
but on stderr they carry machine paths and differ between machines. ``captured_log``
collects them for the notebook to print what matters; ``generated_code`` keeps the programs
Inductor writes (``TORCH_LOGS="output_code"``); ``without_paths`` cuts file paths;
``native_stderr_discarded`` silences what C++ code writes to stderr (the profiler's log lines);
``autotune_results`` reads the timings max-autotune writes to stderr.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import torch

OUTPUT_CODE_LOGGER = "torch._inductor.codecache.__output_code"  # the same name on torch 2.8 to 2.15
_OUTPUT_CODE_PREFIX = "Output code: \n"


@contextlib.contextmanager
def captured_log(*names: str) -> Iterator[list[str]]:
    """Collect the messages logged on the loggers ``names`` inside the block, keeping them off stderr.

    Example:
        >>> with captured_log("course.example") as messages:
        ...     logging.getLogger("course.example").warning("recompiled %d times", 8)
        >>> messages
        ['recompiled 8 times']
    """
    if not names or not all(isinstance(name, str) and name for name in names):
        raise ValueError(f"names must be one or more logger names such as 'torch._dynamo'; got {names!r}")
    messages: list[str] = []

    def keep(record: logging.LogRecord) -> bool:
        messages.append(record.getMessage())
        return False  # handled here: the record goes no further

    loggers = [logging.getLogger(name) for name in names]
    for logger in loggers:
        logger.addFilter(keep)
    try:
        yield messages
    finally:
        for logger in loggers:
            logger.removeFilter(keep)


@contextlib.contextmanager
def generated_code() -> Iterator[list[str]]:
    r"""Collect the Python program Inductor generates for each graph compiled inside the block.

    It is what ``TORCH_LOGS="output_code"`` prints: the block runs under
    ``torch._logging.set_logs(output_code=True)``, the programs land in the yielded list (one per
    compiled graph, in order, also for a graph loaded from Inductor's cache) instead of on stderr,
    and the log settings go back to the defaults at the end.

    Example:
        >>> with generated_code() as programs:  # a compile inside logs the same way
        ...     logging.getLogger(OUTPUT_CODE_LOGGER).debug("Output code: \n%s", "def call(args): ...")
        >>> programs
        ['def call(args): ...']
    """
    importlib.import_module("torch._inductor.codecache")  # creates the logger that set_logs turns on

    torch._logging.set_logs(output_code=True)
    try:
        if not logging.getLogger(OUTPUT_CODE_LOGGER).isEnabledFor(logging.DEBUG):
            # set_logs does nothing while TORCH_LOGS is set, so only TORCH_LOGS can turn the log on
            raise RuntimeError(
                f"generated_code needs the output_code log, and TORCH_LOGS={os.environ.get('TORCH_LOGS')!r} "
                "leaves it off; add output_code to TORCH_LOGS or unset it"
            )
        with captured_log(OUTPUT_CODE_LOGGER) as messages:
            programs: list[str] = []
            yield programs
            prefix = _OUTPUT_CODE_PREFIX  # the other output_code messages name files
            programs.extend(m.removeprefix(prefix) for m in messages if m.startswith(prefix))
    finally:
        torch._logging.set_logs()


def without_paths(text: str) -> str:
    """``text`` with every absolute file path cut to its file name (paths differ between machines).

    Example:
        >>> without_paths('File "/home/ann/course/model.py", line 3')
        'File "model.py", line 3'
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str; got {type(text).__name__}")
    return re.sub(r"(?<![\w:/.])/(?:[^\s\"'<>:/]+/)+", "", text)


@contextlib.contextmanager
def native_stderr_discarded() -> Iterator[None]:
    """Send what C++ code writes to file descriptor 2 inside the block to the null device.

    Kineto, torch's profiler, writes a ``USDT: ... profiler_start`` line there at every start and
    stop; Jupyter shows it in the cell's output, and the line holds a time and a process id.

    Example:
        >>> with native_stderr_discarded():
        ...     _ = os.write(2, b"not shown\\n")
    """
    try:
        saved = os.dup(2)
    except OSError:  # no file descriptor 2 (e.g. some embedded interpreters): nothing to hide
        yield
        return
    sys.stderr.flush()
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


@dataclass(frozen=True)
class AutotuneResult:
    """What max-autotune timed for one operation: ``timings`` maps each choice to milliseconds,
    fastest first; ``chosen`` is the fastest, the one Inductor keeps."""

    operation: str
    sizes: str
    timings: dict[str, float]

    @property
    def chosen(self) -> str:
        return next(iter(self.timings))


_AUTOTUNE_HEADER = re.compile(r"^AUTOTUNE (\w+)\((.*)\)$")
_AUTOTUNE_CHOICE = re.compile(r"^  (\S+) (\d+(?:\.\d+)?) ms")


def autotune_results(stderr_text: str) -> list[AutotuneResult]:
    """The tables max-autotune writes to stderr (``AUTOTUNE op(sizes)``, then one line per choice
    with its time), parsed; the format is ``log_results`` in ``torch/_inductor/select_algorithm.py``
    on torch 2.8, 2.13 and 2.15. Capture them with ``contextlib.redirect_stderr``.

    Example:
        >>> lines = ["AUTOTUNE mm(1x64, 64x64)", "strides: [64, 1], [64, 1]", "  mm 0.0100 ms 100.0% ",
        ...          "  cpp_gemm_1 0.0200 ms 50.0% ", "SingleProcess AUTOTUNE benchmarking takes 0.1 seconds"]
        >>> [(r.operation, r.sizes, r.chosen, r.timings) for r in autotune_results("\\n".join(lines))]
        [('mm', '1x64, 64x64', 'mm', {'mm': 0.01, 'cpp_gemm_1': 0.02})]
    """
    if not isinstance(stderr_text, str):
        raise TypeError(f"stderr_text must be the captured text (a str); got {type(stderr_text).__name__}")
    results: list[AutotuneResult] = []
    for line in stderr_text.splitlines():
        header = _AUTOTUNE_HEADER.match(line)
        if header:
            results.append(AutotuneResult(header[1], header[2], {}))
            continue
        choice = _AUTOTUNE_CHOICE.match(line)
        if choice and results:
            results[-1].timings[choice[1]] = float(choice[2])
    return results
