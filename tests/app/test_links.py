"""Views as links (laya.app.links), the HTML report (laya.app.export), heatmap clicks; the link round trip
through the pages: tests/pages/test_page_links.py."""

from __future__ import annotations

import re

import pandas as pd
import plotly.graph_objects as go
import pytest

from laya.app import classwise_views
from laya.app.export import html_report
from laya.app.links import MAX_VALUE, View, decode_view, encode_view, view_url


def test_encode_decode_round_trip() -> None:
    view = View(model="colours-mlp/concat", example="b.png", mode="mean", posthoc=("saliency", "integrated_gradients"))
    view = view.with_switch("class", "red").with_switch("threshold", 0.95).with_switch("order", "desc")
    params = encode_view(view)
    assert params == {"model": "colours-mlp/concat", "example": "b.png", "mode": "mean", "class": "red",
                      "posthoc": "saliency,integrated_gradients", "threshold": "0.95", "order": "desc"}  # fmt: skip
    assert decode_view(params) == view and view.switch("threshold") == "0.95"
    assert view.with_switch("class", None).switch("class") is None
    assert encode_view(View()) == {} and decode_view({}) == View()
    assert view_url("http://h/inspect-input", View(mode="zero")) == "http://h/inspect-input?mode=zero"
    assert view_url(None, View().with_switch("class", "a b")) == "?class=a+b"
    with pytest.raises(ValueError, match="unknown page switch"):
        View().with_switch("evil", "1")
    old = decode_view({"group": "colours · mlp 16-12-8", "head": "concat"})  # links of older versions still open
    assert (old.group, old.head) == ("colours · mlp 16-12-8", "concat")


def test_decode_drops_malformed_values() -> None:
    view = decode_view({"mode": "explode", "posthoc": "saliency,rm -rf,saliency", "head": "x" * (MAX_VALUE + 1),
                        "group": "a\x00b", "example": ["one.png", "two.png"], "unknown": "1", "threshold": "2",
                        "input": "../etc", "outcome": "maybe", "values": "loo"})  # fmt: skip
    assert view == View(example="two.png", posthoc=("saliency",), switches=(("values", "loo"),))


def test_html_report_is_self_contained() -> None:
    fig = go.Figure(go.Bar(x=["a", "b"], y=[1, 2]))
    table = pd.DataFrame({"layer": ["block 1"], "drop": [0.123456]})
    page = html_report("Inspect <x>", [("Chart", fig), ("", fig), ("Table", table), ("Note", "a & b")], "sub")
    assert page.startswith("<!DOCTYPE html>") and "Inspect &lt;x&gt;" in page and "a &amp; b" in page
    assert page.count("plotly.js v") == 1  # plotly.js embedded once, for offline viewing
    assert page.count('class="plotly-graph-div"') == 2
    assert "<td>block 1</td>" in page and "0.1235" in page


def test_clicked_class() -> None:
    event = {"selection": {"points": [{"x": "block 1", "y": "red"}, {"x": "block 2", "y": "green"}]}}
    assert classwise_views.clicked_class(event, ["red", "green"]) == "green"
    assert classwise_views.clicked_class({"selection": {"points": []}}, ["red"]) is None
    assert classwise_views.clicked_class({"selection": {"points": [{"y": "nope"}]}}, ["red"]) is None
    assert classwise_views.clicked_class(None, ["red"]) is None


def test_clickable_heatmap_has_a_marker_per_cell_with_the_hover_text() -> None:
    heat = go.Heatmap(z=[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], x=["b1", "b2"], y=["red", "green", "blue"],
                      customdata=[[[0.1, 5], [0.2, 5]], [[0.3, 6], [0.4, 6]], [[0.5, 7], [0.6, 7]]],
                      hovertemplate="class %{y}<br>mean %{z:.4f} ± %{customdata[0]:.4f}")  # fmt: skip
    fig = classwise_views.clickable_heatmap(go.Figure(heat))
    cells = fig.data[1]
    assert list(zip(cells.x, cells.y)) == [(x, y) for y in ("red", "green", "blue") for x in ("b1", "b2")]
    assert [list(c) for c in cells.customdata[:2]] == [[0.1, 5, 1.0], [0.2, 5, 2.0]]
    assert cells.hovertemplate == "class %{y}<br>mean %{customdata[2]:.4f} ± %{customdata[0]:.4f}"
    assert fig.data[0].hoverinfo == "skip"


def test_html_report_escapes_a_hostile_name_in_a_figure() -> None:
    """A class named ``<a href=…>`` is text in the exported report's figure, as on the page, never a link."""
    hostile = '<a href="javascript:alert(3)">c</a>'
    fig = go.Figure(go.Bar(x=[hostile], y=[1.0]), layout={"title": {"text": hostile}})
    page = html_report("Inspect", [("Chart", fig)], "sub")
    drawn = re.findall(r'"x":\["([^"]*)|"title":\{"text":"([^"]*)', page)  # the bar's label, the title
    assert sorted(s for pair in drawn for s in pair if s) == ["&lt;a href=\\", "&lt;a href=\\"]  # the literal <a
