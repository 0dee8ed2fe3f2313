"""A table a notebook shows: rendered as a table in JupyterLab, Colab and on GitHub."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from IPython.display import Markdown


def _cell(value: Any) -> str:
    text = f"{value:.3g}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Markdown:
    """Rows as a Markdown table to ``display()``; floats keep three significant digits.

    Example:
        >>> print(markdown_table(["mode", "graphs"], [["default", 1], ["eager", 2.0]]).data)
        | mode | graphs |
        |---|---|
        | default | 1 |
        | eager | 2 |
    """
    if isinstance(header, str) or not header or not all(isinstance(h, str) for h in header):
        raise TypeError("header must be a non-empty sequence of column names (str)")
    if isinstance(rows, str) or not isinstance(rows, Sequence):
        raise TypeError(f"rows must be a sequence of rows; got {type(rows).__name__}")
    for index, row in enumerate(rows):
        if isinstance(row, str) or not isinstance(row, Sequence) or len(row) != len(header):
            raise ValueError(f"rows[{index}] must be a sequence of {len(header)} values, one per column")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return Markdown("\n".join(lines))
