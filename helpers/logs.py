"""Read what torch logs (``TORCH_LOGS`` artifacts) as text, instead of letting it reach stderr.

Torch's log artifacts (graph breaks, guards, recompilations) are worth reading in a lesson,
but on stderr they carry machine paths and differ between machines. ``captured_log``
collects them for the notebook to print what matters; ``without_paths`` cuts file paths;
``native_stderr_discarded`` silences what C++ code writes to stderr (the profiler's log lines).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from collections.abc import Iterator


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
