"""Static check: every text a page gives a Streamlit element that renders Markdown is a literal, or went through
:func:`laya.app.text.shown` (``docs/decisions/untrusted-text.md``).

Streamlit renders Markdown (images, links, HTML-free GFM, ``$…$`` LaTeX, ``:emoji:`` shortcodes) in element bodies
(``st.markdown``, ``st.caption``, alerts, titles), in every widget label and tooltip, in ``st.metric``'s label,
value and delta, in radio options, image captions, expander and tab labels, column tooltips, and in every cell and
header of ``st.table``. A string reaching one of those parameters is accepted when it is a literal, a call of
``shown``, an f-string whose every value is a ``shown`` call or a number formatted as one (``{x:.1%}``), or a
concatenation or ``a if c else b`` of accepted parts; anything else (a name, an attribute, any other call) fails.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from laya.app.text import MARKUPS, plain, shown, unplain

REPO = Path(__file__).resolve().parents[2]
# element -> (positional indices, keywords) of its parameters that render Markdown
TEXT_PARAMS: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] = {
    **dict.fromkeys(("markdown", "caption", "title", "header", "subheader", "write", "toast", "spinner",
                     "error", "warning", "info", "success", "expander", "popover", "tabs", "form_submit_button"),
                    ((0,), ("body", "label", "text", "help", "tabs"))),  # fmt: skip
    **dict.fromkeys(("selectbox", "multiselect", "text_input", "text_area", "number_input", "slider",
                     "select_slider", "checkbox", "toggle", "file_uploader", "camera_input", "button",
                     "download_button", "link_button", "page_link", "color_picker", "date_input", "time_input",
                     "pills", "segmented_control", "feedback", "data_editor"),
                    ((0,), ("label", "help"))),  # fmt: skip
    "radio": ((0,), ("label", "help", "captions")),
    "metric": ((0, 1, 2), ("label", "value", "delta", "help")),
    "image": ((1,), ("caption",)),
    "progress": ((1,), ("text",)),
    "table": ((0,), ("data",)),
    "plotly_chart": ((0,), ("figure_or_data",)),  # shown(figure, "plotly")
    "pick": ((1,), ()),  # pages.common.switches.pick(widget, label, options, ...)
    "number": ((1,), ()),  # pages.common.switches.number(widget, label, ...)
}
MARKDOWN_OPTIONS = ("radio", "pills", "segmented_control")  # widgets whose option labels render Markdown
NUMERIC = tuple("bdeEfFgGnoxX%")  # format-spec types that only numbers accept


def _is_shown(node: ast.AST) -> bool:
    func = node.func if isinstance(node, ast.Call) else None
    return (isinstance(func, ast.Name) and func.id == "shown") or (
        isinstance(func, ast.Attribute) and func.attr == "shown"
    )


def _constant(node: ast.AST) -> bool:
    """A module constant (``ALL_CAPS`` name or attribute), one of its entries (``labels.MODE_HELP[mode]``: code's
    own text, a KeyError otherwise), or ``len(...)``."""
    if isinstance(node, ast.Subscript):
        return _constant(node.value)
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id == "len"
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return len(name) > 1 and name.isupper()


def _numeric(value: ast.FormattedValue) -> bool:
    spec = value.format_spec
    text = "".join(v.value for v in spec.values if isinstance(v, ast.Constant)) if spec else ""
    return text.endswith(NUMERIC) or (text.endswith(",") and value.conversion == -1)


def safe(node: ast.AST, bound: frozenset[str] = frozenset()) -> bool:
    """Whether ``node`` is page text that cannot carry untrusted Markdown (see the module docstring); ``bound``:
    loop variables of a comprehension over safe items."""
    if isinstance(node, ast.Constant) or (isinstance(node, ast.Name) and node.id in bound):
        return True
    if isinstance(node, ast.JoinedStr):
        return all(isinstance(v, ast.Constant) or safe(v.value, bound) or _numeric(v) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return safe(node.left, bound) and safe(node.right, bound)
    if isinstance(node, ast.IfExp):
        return safe(node.body, bound) and safe(node.orelse, bound)
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(safe(e, bound) for e in node.elts)
    if isinstance(node, (ast.GeneratorExp, ast.ListComp)):  # (f"- {line}" for line in depth_views.ood_status(...))
        names = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        return safe(node.elt, bound | names if all(safe(g.iter, bound) for g in node.generators) else bound)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("join", "format"):
        arguments = [*node.args, *(k.value for k in node.keywords)]  # ", ".join(safe items), CONSTANT.format(safe)
        return safe(node.func.value, bound) and all(safe(a, bound) for a in arguments)
    return _is_shown(node) or _constant(node) or _markdown_builder(node)


# laya functions that return page Markdown (bold, code) built from code text and numbers, with any text read from a
# file escaped by laya.app.text: test_markdown_builders_escape_what_they_read feeds them hostile text
MARKDOWN_BUILDERS = frozenset({"ood_status", "maps_caption", "lens_caption", "exit_verdict", "faithfulness_verdict",
                               "measured_exit_verdict", "unit_profile_caption", "apart_text",
                               "unit_patching_caption", "exit_estimate_caption"})  # fmt: skip


def _markdown_builder(node: ast.AST) -> bool:
    func = node.func if isinstance(node, ast.Call) else None
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return name in MARKDOWN_BUILDERS


def _safe_options(call: ast.Call, name: str) -> bool:
    """A Markdown-option widget's options are literals, or its ``format_func`` is a lambda returning safe text."""
    index = 2 if name == "pick" else 1
    options = call.args[index] if len(call.args) > index else next(
        (k.value for k in call.keywords if k.arg == "options"), None)  # fmt: skip
    func = next((k.value for k in call.keywords if k.arg == "format_func"), None)
    if func is not None:
        return (isinstance(func, ast.Lambda) and safe(func.body)) or (isinstance(func, ast.Name) and func.id == "shown")
    return options is None or safe(options)


def _widget_name(call: ast.Call) -> str | None:
    """The element a call makes: ``st.caption`` / ``column.caption`` -> caption; ``switches.pick(st.radio, …)``
    -> pick (its label is checked) and radio (its options)."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def violations(source: str, filename: str = "<page>") -> list[str]:
    """``file:line: element(parameter)`` for every text parameter given an unsafe value."""
    found = []
    for call in (n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)):
        name = _widget_name(call)
        if name is None:
            continue
        params = TEXT_PARAMS.get(name) or (((), ("help",)) if name.endswith("Column") else None)
        if params is None:
            continue
        if name in ("table", "write") and isinstance(call.func, ast.Attribute) and _receiver(call) == "common":
            continue  # pages.common.table escapes its frame itself (the check covers its st.table call)
        positions, keywords = params
        values = [(f"#{i}", call.args[i]) for i in positions if i < len(call.args)]
        values += [(k.arg, k.value) for k in call.keywords if k.arg in keywords]
        found += [f"{filename}:{v.lineno}: {name}({p})" for p, v in values if not safe(v)]
        widget = call.args[0].attr if name == "pick" and call.args and isinstance(call.args[0], ast.Attribute) else name
        if (name in MARKDOWN_OPTIONS or widget in MARKDOWN_OPTIONS) and not _safe_options(call, name):
            found.append(f"{filename}:{call.lineno}: {widget}(options)")
    return found


def _receiver(call: ast.Call) -> str | None:
    value = call.func.value if isinstance(call.func, ast.Attribute) else None
    return value.id if isinstance(value, ast.Name) else None


def page_files() -> list[Path]:
    return [REPO / "app.py", *sorted((REPO / "pages").rglob("*.py"))]


def test_every_page_text_is_literal_or_shown() -> None:
    found = [v for path in page_files() for v in violations(path.read_text(), str(path.relative_to(REPO)))]
    assert not found, "untrusted text reaching Markdown without laya.app.text.shown:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "snippet",
    [
        "st.metric('Prediction', explanation.label)",
        "column.metric(f'Exit at {layer}', 'x')",
        "st.caption(f'{name}, as the model sees it')",
        "st.markdown('**' + name + '**')",
        "st.sidebar.error(str(error))",
        "st.info(NO_MODELS.format(root=root))",
        "st.expander(f'{n} unreadable: {names}')",
        "st.tabs(['a', name])",
        "st.image(pixels, caption=name)",
        "st.radio('Head', paths, format_func=labels.__getitem__)",
        "st.radio('Class', classes)",
        "switches.pick(st.radio, 'Values', kinds, 'v', 'k', format_func=lambda k: kinds[k])",
        "switches.pick(st.selectbox, f'Layer {layer}', layers, 'l', 'k')",
        "st.table(frame)",
        "st.plotly_chart(figure, key='k')",
        "st.column_config.NumberColumn('Score', help=f'{method}: {layer}')",
        "st.caption(f'{x:>10}')",
        "st.metric('a', value=f'{shown(a)} and {b}')",
    ],
)
def test_the_check_fails_on_untrusted_text(snippet: str) -> None:
    assert violations(snippet), snippet


@pytest.mark.parametrize(
    "snippet",
    [
        "st.metric('Prediction', shown(explanation.label))",
        "st.caption(f'{shown(name)}, {n:,} inputs at {p:.1%}')",
        "st.markdown('**' + shown(name) + '**' if bold else shown(name))",
        "st.radio('Mode', modes, format_func=lambda m: shown(labels.mode_label(m)))",
        "st.radio('Source', ['a', 'b'])",
        "st.radio('Source', sources, format_func=shown)",
        "st.info(NO_MODELS.format(root=shown(root, 'code')))",
        "st.selectbox('Class', classes, format_func=classes.__getitem__)",
        "st.table(shown(frame))",
        "column.plotly_chart(shown(figure, 'plotly'), key='k')",
        "common.table(frame)",
        "st.dataframe(frame)",
    ],
)
def test_the_check_accepts_literal_and_shown_text(snippet: str) -> None:
    assert not violations(snippet), violations(snippet)


HOSTILE = "![px](http://127.0.0.1:9/p.png) [c](javascript:alert(3)) <img src=http://127.0.0.1:9/h.png> $x^2$ :smile: &"


def test_shown_makes_text_plain_in_every_markup() -> None:
    markdown = shown(HOSTILE)
    assert unplain(markdown) == HOSTILE and not re.search(r"(?<!\\)[!\[\]()<>$:&]", markdown), markdown
    assert "://" not in markdown and not re.search("www[.]|@[a-z]", shown("www.x.org a@b.c"))  # GFM's autolinks
    plotly = shown(HOSTILE, "plotly")
    assert "<" not in plotly and ">" not in plotly and "$" not in plotly
    assert plotly.count("&lt;") == 1 and plotly.endswith(" &amp;")
    assert shown(HOSTILE, "text") == HOSTILE
    assert shown("a `b`\nc", "code") == "a 'b' c"  # inside a code span Markdown is inert; a backtick would end it
    assert set(MARKUPS) == {"markdown", "plotly", "code", "text"}
    with pytest.raises(ValueError, match="markup 'html'.*one of"):
        shown("x", "html")  # type: ignore[arg-type]


def test_shown_escapes_a_whole_table() -> None:
    frame = pd.DataFrame({"class": [HOSTILE, "red"], f"p({HOSTILE})": [0.5, 0.25], "after": ["red", HOSTILE]})
    frame = frame.set_index("class")
    table = shown(frame)
    assert table["after"].tolist() == ["red", plain(HOSTILE)], "text cells (pandas' str dtype included)"
    assert table.index.name == plain("class") and list(table.index) == [plain(HOSTILE), "red"]
    assert list(table.columns) == [plain(f"p({HOSTILE})"), "after"] and table.iloc[:, 0].tolist() == [0.5, 0.25]
    assert frame.index[0] == HOSTILE, "the caller's frame is left as it was"


def test_markdown_builders_escape_what_they_read() -> None:
    """The builders the check trusts (:data:`MARKDOWN_BUILDERS`) show text read from a report or ``lens.csv``
    plain, and keep their own Markdown."""
    from laya.app.depth_plots import lens_caption
    from laya.app.depth_views import ood_status

    summary = pd.DataFrame({"class": ["all"], "n": [5], "command": [f"`{HOSTILE}"], "readout": [HOSTILE]})
    caption = lens_caption("linear probes", summary, "red")
    before, code, after = caption.split("`")  # the command stays one code span (where Markdown is inert)
    assert "![px]" in code and "![px]" not in before + after and plain(HOSTILE) in after, caption
    depth = {"detection": {"table": [{"task": "OOD: noise", "score": HOSTILE, "auroc": 0.8}], "flag_thresholds": {}}}
    lines = ood_status({"msp": -0.5, HOSTILE: 1.0}, depth)
    assert any(plain(HOSTILE) in line for line in lines) and not any("![px]" in line for line in lines)
    assert any("**" in line for line in lines), "the builders' own Markdown stays"
    from types import SimpleNamespace

    from laya.app.network_views import apart_text
    from laya.app.patching_plots import unit_patching_caption

    apart = apart_text(SimpleNamespace(units=[HOSTILE, "b"], residual=[False, True]))
    table = pd.DataFrame({"unit": [HOSTILE, "b"], "keeps input": [False, True], "constructed": [True, False],
                          "prob_change": [-0.5, 0.1]})  # fmt: skip
    for text in (apart, unit_patching_caption(table, "own classifier")):  # the unit names: code spans, inert
        assert "![px]" in "".join(text.split("`")[1::2]) and "![px]" not in "".join(text.split("`")[::2]), text

    from laya.app.depth_views import exit_estimate_caption

    with pytest.raises((TypeError, ValueError)):  # numbers only: a text cannot reach its caption
        exit_estimate_caption({"saved": HOSTILE, "threshold": 0.9})


def test_shown_escapes_a_figure_and_keeps_its_own_tags() -> None:
    import plotly.graph_objects as go

    from laya.app.text import clicked_name

    heatmap = go.Heatmap(z=[[1.0, 2.0]], x=[HOSTILE, "l2"], y=[HOSTILE], hovertemplate="%{y}<br>%{x}<extra></extra>")
    figure = go.Figure(heatmap)
    figure.update_layout(title=f"{HOSTILE}: scores", xaxis={"categoryorder": "array", "categoryarray": [HOSTILE, "l2"]})
    figure.add_annotation(text=f"<b>{HOSTILE}</b>", x=HOSTILE, y=HOSTILE)
    escaped = shown(figure, "plotly")
    texts = [escaped.layout.title.text, escaped.layout.annotations[0].text, *escaped.data[0].x, *escaped.data[0].y,
             *escaped.layout.xaxis.categoryarray]  # fmt: skip
    assert all("<img" not in t and "<a" not in t and "$" not in t for t in texts), texts
    assert escaped.data[0].hovertemplate == "%{y}<br>%{x}<extra></extra>" and texts[1].startswith("<b>")
    assert escaped.data[0].x[0] == escaped.layout.xaxis.categoryarray[0] == escaped.layout.annotations[0].x
    assert figure.data[0].x[0] == HOSTILE, "the builder's figure is left as it was"
    assert clicked_name(escaped.data[0].x[0], [HOSTILE, "l2"]) == HOSTILE and clicked_name("l2", ["l2"]) == "l2"
    assert clicked_name("other", [HOSTILE]) is None and clicked_name(3, [HOSTILE]) is None
    with pytest.raises(ValueError, match="markup 'plotly', not 'markdown'"):
        shown(figure)
    # the escaped copy is built without plotly's validation: it must serialise as a validated one
    assert json.loads(escaped.to_json()) == json.loads(go.Figure(escaped.to_dict()).to_json())
    assert json.loads(shown(go.Figure(go.Bar(x=["a"], y=[1.0])), "plotly").to_json()) == json.loads(
        go.Figure(go.Bar(x=["a"], y=[1.0])).to_json()), "a figure without untrusted text is shown as it is"


def test_the_measured_exit_verdict_shows_a_hostile_exit_kind_plain() -> None:
    """``measured_exit_verdict`` (a trusted builder above) reads the exit kinds from ``exits.json``, which an
    uploaded checkpoint supplies: a kind written as Markdown is shown as text."""
    from laya.app.verdicts import measured_exit_verdict

    base = {"exits": HOSTILE, "plain_ms_b1": 1.0, "exit_ms_b1": 1.0, "accuracy": 0.9}
    runs = [{**base, "policy": "full model", "parameter": None, "macs": 10.0, "macs_saved": 0.0, "saved_b1": 0.0},
            {**base, "policy": "confidence 0.9", "parameter": 0.9, "macs": 8.0, "macs_saved": 0.2, "saved_b1": 0.1},
            {**base, "policy": "confidence 0.5", "parameter": 0.5, "macs": 6.0, "macs_saved": 0.4, "saved_b1": 0.3,
             "plain_ms_b1": 1.1, "accuracy": 0.5}]  # fmt: skip
    text = measured_exit_verdict({"runs": runs})
    assert plain(HOSTILE) in text and "![px]" not in text, text
