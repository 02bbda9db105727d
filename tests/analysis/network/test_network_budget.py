"""The network report's cost in rows through the network, and the samples a budget affords (issue 47 §2)."""

from __future__ import annotations

import pytest

from laya.analysis.network.budget import report_rows, within_budget
from laya.analysis.network.report import NetworkOptions

ASKED = NetworkOptions(budget=3)  # the defaults: 200 inputs explained, 50 Grad-CAM images, a lens of 2,000


def test_the_rows_of_each_sample_counted_from_the_units_and_options() -> None:
    """Eight units, K = 8, 5 draws, 8 IG steps, 16 steps and 4 ROAD fractions: the sums of the module docstring."""
    rows = report_rows(8, ASKED)
    profiles = 8 * 8 + 1 + 8 + 1
    assert rows.lesioned == profiles + 1 + 5 * 8
    assert rows.explained == profiles + 1 + 5 * 8 + 2 + 3 + 3 * 8 * 8 == 312
    assert rows.gradcam == 3 + 2 * 8 * (2 * 17 + 2 * 4) == 675 and rows.lens == 1
    assert report_rows(12, ASKED).explained > rows.explained  # a deeper network costs more per input


def test_a_large_split_keeps_every_size_asked() -> None:
    """CIFAR-10's 60,000 images: the defaults cost 98,150 rows, under 3 passes; nothing is capped."""
    sized = within_budget(ASKED, 8, 10, 50_000, 10_000, 3)
    assert not sized.capped and sized.options == ASKED and sized.rows == sized.asked_rows == 98_150
    assert sized.line() == ("Network report within its budget (3 forward passes over the 60,000 images, 180,000 "
                            "rows): 98,150 rows.")  # fmt: skip


def test_a_small_split_at_any_resolution_is_capped_within_the_budget() -> None:
    """2,000 + 500 images (the 224 px benchmark's): 7,500 rows; the lens's 2,000 first, then 17 explained inputs
    (5,304 rows); the Grad-CAM test's images would be fewer than one per class, so it is not run."""
    sized = within_budget(ASKED, 8, 10, 2_000, 500, 3)
    assert sized.capped and sized.options.limit == 17 and sized.options.gradcam_sample == 0
    assert sized.rows == 2_000 + 17 * 312 <= 7_500 < sized.asked_rows
    assert sized.options.lesion_limit is None and sized.options.budget == 3  # the rest as asked
    assert sized.line() == (
        "Network report sized to its budget (3 forward passes over the 2,500 images, 7,500 rows): 17 test inputs "
        "explained (asked: 200), the Grad-CAM test not run (asked: 50 images) (7,304 rows; what was asked costs 98,150: rerun it with `laya "
        "network`, or attach with --budget 0)")  # fmt: skip
    more = within_budget(ASKED, 8, 10, 2_000, 500, 30)  # 75,000 rows: Grad-CAM on at least one image per class
    assert 10 <= more.options.gradcam_sample < 50 and 17 < more.options.limit < 200 and more.rows <= 75_000
    assert more.options.limit == int(200 * (75_000 - 2_000) / (98_150 - 2_000))  # both scaled by one factor


def test_the_explained_inputs_keep_one_per_class_and_a_zero_budget_caps_nothing() -> None:
    tiny = within_budget(ASKED, 8, 10, 2_000, 500, 0.5)  # the lens alone is over it
    assert tiny.options.limit == 10 and tiny.options.gradcam_sample == 0 and tiny.rows > 1_250
    own = within_budget(NetworkOptions(lesion_limit="all"), 8, 10, 2_000, 500, 3)  # a lesion sample of its own
    assert own.options.limit == 10 and 10 <= own.options.lesion_limit < 500 and "the lesion study on" in own.line()
    assert within_budget(ASKED, 8, 10, 2_000, 500, 0).options == ASKED
    for bad in (dict(budget=-1), dict(units=0), dict(tests=0)):
        args = dict(options=ASKED, units=8, classes=10, trains=2_000, tests=500, budget=3) | bad
        with pytest.raises(ValueError, match="budget"):
            within_budget(**args)
    with pytest.raises(ValueError, match="budget"):
        NetworkOptions(budget=-1)
