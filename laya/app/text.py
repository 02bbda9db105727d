"""Untrusted text on a page: shown as plain text, never as Markdown or HTML, and without server paths.

Every string that comes from a checkpoint (class names, dataset, layer names, messages that quote its
values), a dataset, an upload (file names) or a URL reaches a page through one function, :func:`shown`,
with the markup of the place it goes to (``docs/decisions/untrusted-text.md``):

- ``"markdown"`` (default): Streamlit elements that render Markdown: ``st.markdown``, ``st.caption``,
  alerts, titles, ``st.metric`` (label, value, delta), widget labels and tooltips, radio options, image
  captions, expander and tab labels, column tooltips, every cell and header of ``st.table`` (:func:`plain`);
- ``"plotly"``: a whole figure for ``st.plotly_chart``: plotly renders a subset of HTML (``<a href>``,
  ``<b>``, ``<br>``…) and, with MathJax, ``$…$`` in titles, axis and tick labels, legends, annotations and
  hover text, so every string of those is escaped (:func:`plotly_plain`) but for the layout tags the figure
  builders write (:data:`PLOTLY_TAGS`: line breaks, bold, sub/superscripts; none makes a link or a fetch);
- ``"code"``: inside a Markdown code span (`` `…` ``), where Markdown is inert: backticks become ``'``
  and line breaks spaces, so the text cannot end the span;
- ``"text"``: elements that show text as it is (selectbox and multiselect options, ``st.dataframe``).

``![x](http://host/pixel.png)`` as a class name then shows those characters instead of making every
visitor's browser fetch the image. All three also go through :func:`public`, which names an uploaded
checkpoint "the uploaded checkpoint" and, in deploy mode (``LAYA_ALLOW_PATHS=0``), replaces the server's
folders by their last name (``models``). ``tests/pages/test_untrusted_text.py`` fails on any page text
that reaches Markdown without :func:`shown`.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, overload

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from laya.app import deploy
from laya.app.uploads import upload_store

# ASCII punctuation that Markdown, GitHub-flavoured Markdown or Streamlit's extensions give a meaning
# (images, links, emphasis, code, HTML, tables, strike-through, LaTeX, :emoji: and :color[...] directives)
MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+!|<>~$:&])")
# where GitHub-flavoured Markdown turns bare text into a link (after escapes are read): ``x://``, ``www.``, ``a@b``
AUTOLINK = re.compile(r"(?i)(://|www\.|@)")
JOINER = "\u2060"  # WORD JOINER: invisible, and no URL or e-mail address runs across it
UPLOADED = "the uploaded checkpoint"
Markup = Literal["markdown", "plotly", "code", "text"]
MARKUPS: tuple[Markup, ...] = ("markdown", "plotly", "code", "text")
# what plotly's text renderer (svg_text_utils) reads as markup: tags, entities, and $…$ for MathJax
PLOTLY = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "$": "&#36;"}
PLOTLY_TAGS = re.compile(r"&lt;(/?(?:br|b|i|sub|sup|extra))&gt;")  # builders' own tags, kept in a figure
# the figure properties plotly draws as text (trace data included: categories become tick labels and hover text)
FIGURE_TEXT = frozenset({"text", "name", "hovertext", "hovertemplate", "texttemplate", "ticktext", "tickvals",
                         "categoryarray", "x", "y", "customdata", "labels"})  # fmt: skip


def plain(text: object) -> str:
    """``text`` with every Markdown-active character backslash-escaped, so it renders literally, and a
    :data:`JOINER` inside every ``://``, ``www.`` and ``@``, so that no URL or address in it becomes a link.

    >>> plain("![x](p.png)")
    '\\\\!\\\\[x\\\\]\\\\(p.png\\\\)'
    """
    escaped = MARKDOWN.sub(r"\\\1", str(text))
    return AUTOLINK.sub(lambda m: m.group()[0] + JOINER + m.group()[1:], escaped)


def plotly_plain(text: object) -> str:
    """``text`` with plotly's markup characters as entities (``<`` -> ``&lt;``), so it renders literally.

    >>> plotly_plain("<a href='x'>$a$</a>")
    "&lt;a href='x'&gt;&#36;a&#36;&lt;/a&gt;"
    """
    return re.sub(r"[&<>$]", lambda m: PLOTLY[m.group()], str(text))


def code_plain(text: object) -> str:
    """``text`` for a Markdown code span: backticks as ``'`` and line breaks as spaces, so it cannot end the span."""
    return str(text).replace("`", "'").replace("\r", " ").replace("\n", " ")


def clicked_name(value: object, names: Sequence[str]) -> str | None:
    """The name of ``names`` a clicked point's ``value`` stands for (raw, or escaped by :func:`shown` of a figure),
    else None."""
    if not isinstance(value, str):
        return None
    return value if value in names else next((n for n in names if _figure_text(n, "x") == value), None)


def _each_text(frame: pd.DataFrame, change: Callable[[str], str]) -> pd.DataFrame:
    """A copy of ``frame`` with ``change`` applied to every column name, index label and text cell."""
    cell = lambda v: change(v) if isinstance(v, str) else v  # noqa: E731
    renamed = frame.rename(columns=cell, index=cell).rename_axis(
        index=[cell(n) for n in frame.index.names], columns=[cell(n) for n in frame.columns.names]
    )
    return renamed.apply(lambda column: column if pd.api.types.is_numeric_dtype(column) else column.map(cell))


@overload
def unplain(text: pd.DataFrame) -> pd.DataFrame: ...
@overload
def unplain(text: str) -> str: ...
def unplain(text: str | pd.DataFrame) -> str | pd.DataFrame:
    """Inverse of :func:`plain`, of a text or of a table :func:`shown` escaped (for tests and for comparing what a
    page shows with a message)."""
    if isinstance(text, pd.DataFrame):
        return _each_text(text, unplain)
    return re.sub(r"\\(.)", r"\1", text.replace(JOINER, ""))


def _variants(path: Path) -> list[str]:
    return sorted({str(path), os.path.realpath(path)}, key=len, reverse=True)


def public(text: object, upload_root: Path | None = None) -> str:
    """``text`` without server paths: an upload's folder becomes :data:`UPLOADED`; in deploy mode
    (:func:`laya.app.deploy.allow_paths` off) the models folder, the path and data roots, the temporary
    folder and the home folder become their last name."""
    return _scrubber(upload_root)(str(text))


def _scrubber(upload_root: Path | None = None) -> Callable[[str], str]:
    """:func:`public` for many texts: the folders and their real paths (system calls) worked out once."""
    root = upload_root if upload_root is not None else upload_store().root
    uploads = [re.compile(re.escape(v) + r"(/[^/\s'\"`);,]+)?(/[^\s'\"`);,]*)?") for v in _variants(root)]
    pairs: list[tuple[str, str]] = []
    if not deploy.allow_paths():
        folders = [deploy.models_root(), *deploy.path_roots(), *deploy.data_roots(), Path(tempfile.gettempdir()),
                   Path.home()]  # fmt: skip
        pairs = sorted(((v, Path(v).name or "/") for f in folders for v in _variants(f) if v not in ("/", "")),
                       key=lambda p: -len(p[0]))  # fmt: skip

    def scrub(text: str) -> str:
        for pattern in uploads:
            text = pattern.sub(UPLOADED, text)
        for variant, name in pairs:
            text = text.replace(variant, name)
        return text

    return scrub


def _figure_text(node: object, key: str | None = None) -> object:
    """A figure's dict (:meth:`go.Figure.to_dict`) with every string under :data:`FIGURE_TEXT` escaped."""
    if isinstance(node, dict):
        return {k: v if k == "template" else _figure_text(v, k) for k, v in node.items()}
    if isinstance(node, np.ndarray):
        return node if node.dtype.kind not in "OUS" else np.array([_figure_text(v, key) for v in node.tolist()], object)
    if isinstance(node, (list, tuple)):
        return [_figure_text(v, key) for v in node]
    if isinstance(node, str) and key in FIGURE_TEXT:
        return PLOTLY_TAGS.sub(r"<\1>", plotly_plain(node))
    return node


ESCAPES: dict[str, Callable[[object], str]] = {
    "markdown": plain, "plotly": plotly_plain, "code": code_plain, "text": str,
}  # fmt: skip


@overload
def shown(value: pd.DataFrame, markup: Markup = "markdown") -> pd.DataFrame: ...
@overload
def shown(value: go.Figure, markup: Markup = "markdown") -> go.Figure: ...
@overload
def shown(value: object, markup: Markup = "markdown") -> str: ...
def shown(value: object, markup: Markup = "markdown") -> str | pd.DataFrame | go.Figure:
    """Untrusted ``value`` as plain text for a place rendering ``markup`` (see the module docstring): :func:`public`,
    then escaped for that markup. A DataFrame (for ``st.table``) comes back as a copy with every column name,
    index label and text cell so treated (numbers stay numbers); a plotly figure (``"plotly"`` only) as a copy
    whose text is escaped (clicked points then carry the escaped names: :func:`clicked_name` maps them back)."""
    if markup not in ESCAPES:
        raise ValueError(f"markup {markup!r} is not one of {', '.join(MARKUPS)}")
    if isinstance(value, go.Figure):
        if markup != "plotly":
            raise ValueError(f"a plotly figure is shown with markup 'plotly', not {markup!r}")
        # A validated figure's dict with strings replaced by strings: validating it again, most of the cost of a
        # figure (about 25 ms of a page's faithfulness chart), would change nothing (plotly's own switch, >= 5.20).
        return go.Figure(_figure_text(value.to_dict()), _validate=False)
    if isinstance(value, pd.DataFrame):
        scrub, escape = _scrubber(), ESCAPES[markup]
        return _each_text(value, lambda v: escape(scrub(v)))
    return ESCAPES[markup](public(value))


__all__ = [
    "MARKUPS", "UPLOADED", "Markup", "clicked_name", "code_plain", "plain", "plotly_plain", "public", "shown", "unplain",
]  # fmt: skip
