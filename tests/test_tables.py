import pytest

from helpers.tables import markdown_table


def test_table_renders_rows_and_escapes_pipes():
    text = markdown_table(["a", "b"], [[1, "x|y"], [0.123456, "z"]]).data
    assert text.splitlines() == ["| a | b |", "|---|---|", "| 1 | x\\|y |", "| 0.123 | z |"]


@pytest.mark.parametrize(
    "header, rows, error, match",
    [
        ("ab", [], TypeError, "header"),
        ([], [], TypeError, "header"),
        (["a"], "rows", TypeError, "rows"),
        (["a", "b"], [[1]], ValueError, r"rows\[0\]"),
    ],
)
def test_bad_input_names_the_argument(header, rows, error, match):
    with pytest.raises(error, match=match):
        markdown_table(header, rows)
