"""laya.app.numbers: table numbers at a precision that means something."""

from __future__ import annotations

import math

import pytest

from laya.app.numbers import number_text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.81234, "0.812"),
        (1.0, "1.000"),
        (0.0415, "0.0415"),
        (-0.0042, "-0.00420"),
        (0.00012345, "1.23e-4"),
        (2e-10, "2e-10"),  # was printed 0.0000000002 in the LOO table
        (2.3e-10, "2.3e-10"),
        (1e-13, "< 1e-12"),
        (-1e-13, "> -1e-12"),
        (0.0, "0"),
        (None, "–"),
        (math.nan, "–"),
    ],
)
def test_number_text(value, text):
    assert number_text(value) == text


def test_number_text_digits_and_bad_input():
    assert number_text(0.81234, 2) == "0.81" and number_text(3.14159, 4) == "3.1416"
    assert number_text(5e-7, floor=1e-6) == "< 1e-06"
    with pytest.raises(ValueError, match="digits must be >= 1, got 0"):
        number_text(0.5, 0)
