"""CSV files as spreadsheets write them: the cell separator and the decimal mark.

A spreadsheet in a locale whose decimal mark is the comma (most of Europe, South America) saves
"CSV" with ``;`` between cells and ``3,5`` for 3.5, often with a UTF-8 byte-order mark and CRLF
line ends (the readers open files with ``utf-8-sig`` and ``newline=""`` for those). hwnas reads
such a file as the comma-separated one it stands for, wherever a user hands over a table of
measurements (``hwnas measure import``, ``--calibration``, a recorded device's ``file:``).
"""

from __future__ import annotations


def delimiter(header_line: str) -> str:
    """The cell separator of a CSV file from its header line: ``;`` or a tab where the header
    holds no comma and does hold that character, else ``,``. (Column names never hold a comma;
    arch strings may hold ``,`` and ``;``, OFA's do, but they are cells, quoted, never in the
    header.)"""
    if "," not in header_line:
        for d in (";", "\t"):
            if d in header_line:
                return d
    return ","


def number(cell: str) -> float:
    """A cell as a float, reading a decimal comma (``3,5``) as the point where the cell has one
    comma and no point.

    Raises:
        ValueError: not a number either way.
    """
    text = cell.strip()
    if text.count(",") == 1 and "." not in text:
        text = text.replace(",", ".")
    return float(text)
