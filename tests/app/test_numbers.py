"""laya.app.numbers: table numbers, intervals, rates and p-values at a precision that means something."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from laya.app.numbers import ci_cells, ci_text, count_of, number_text, p_text, percent


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


def test_numbers_are_formatted_as_read() -> None:
    assert p_text(0.0) == "p < 0.001" and p_text(0.0004) == "p < 0.001" and p_text(0.0312) == "p = 0.031"
    assert percent(0.0415) == "4.2%" and percent(None) == "–" and percent(float("nan")) == "–"
    assert count_of(2, 3) == "2 of 3"
    assert ci_text({"estimate": 0.5912, "low": 0.5701, "high": 0.6233}, 2) == "0.59 [0.57, 0.62]"
    assert ci_text({"estimate": float("nan"), "low": 0.1, "high": 0.2}) == "–"
    frame = pd.DataFrame({"a": [0.5, None], "a_low": [0.4, None], "a_high": [0.6, None]})
    assert ci_cells(frame, "a") == ["0.500 [0.400, 0.600]", "–"]  # never "None"
