"""A static HTML report of what a dashboard page shows: its plotly figures and tables, in one file.

The file needs no server: plotly.js is embedded once (about 4.6 MB), so the charts stay
interactive offline; tables are plain HTML. Pages pass :func:`html_report` lazily to
``st.download_button`` so the file is only built when someone asks for it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import datetime, timezone

import pandas as pd
import plotly.graph_objects as go

from laya import __version__

Section = tuple[str, "go.Figure | pd.DataFrame | str"]
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.meta { color: #666; font-size: 0.85rem; }
"""


def html_report(title: str, sections: Sequence[Section], subtitle: str = "") -> str:
    """One self-contained HTML page: ``title``, then each ``(heading, figure | table | text)`` in order."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(f'<p class="meta">{html.escape(subtitle)} · LAYA dashboard {__version__} · {stamp}</p>')
    plotly_js: str | bool = True  # embedded with the first figure only
    for heading, content in sections:
        if heading:
            parts.append(f"<h2>{html.escape(heading)}</h2>")
        if isinstance(content, go.Figure):
            parts.append(content.to_html(full_html=False, include_plotlyjs=plotly_js))
            plotly_js = False
        elif isinstance(content, pd.DataFrame):
            parts.append(content.to_html(index=False, na_rep="–", float_format=lambda v: f"{v:.4g}", border=0))
        else:
            parts.append(f"<p>{html.escape(str(content))}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


__all__ = ["html_report"]
