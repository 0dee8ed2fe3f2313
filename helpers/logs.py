"""Read what torch logs (``TORCH_LOGS`` artifacts) as text, instead of letting it reach stderr.

Torch's log artifacts (graph breaks, guards, recompilations) are worth reading in a lesson,
but on stderr they carry machine paths and differ between machines. ``captured_log``
collects them for the notebook to print what matters; ``without_paths`` cuts file paths.
"""

from __future__ import annotations

import contextlib
import logging
import re
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
