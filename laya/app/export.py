"""A static HTML report of what a dashboard page shows: its plotly figures and tables, in one file.

The file needs no server: plotly.js is embedded once (about 4.6 MB), so the charts stay
interactive offline; tables are plain HTML. A :class:`Provenance` block says what the view was
made from: the setting, the checkpoint and its weights' sha256, the input image (embedded as a
PNG) and the link or command that reproduces it. Pages pass :func:`html_report` lazily to
``st.download_button`` so the file is only built when someone asks for it.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from laya import __version__
from laya.app.text import shown
from laya.model.checkpoint import read_meta

Section = tuple[str, "go.Figure | pd.DataFrame | str"]
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.meta { color: #666; font-size: 0.85rem; }
dl.provenance { display: grid; grid-template-columns: max-content 1fr; gap: 0.2rem 1rem; font-size: 0.9rem; }
dl.provenance dt { color: #555; } dl.provenance dd { margin: 0; word-break: break-all; }
img.input { image-rendering: pixelated; border: 1px solid #ccc; max-width: 260px; }
"""


@dataclass(frozen=True)
class Provenance:
    """What a view was made from: ``setting`` (dataset · backbone), ``checkpoint`` (its name), the weights'
    ``sha256`` (from ``model.json``), ``reproduce`` (a link to the view or a command) and the ``image`` the
    model saw (``uint8 (H, W)`` or ``(H, W, 3)``), if the view is of one input."""

    setting: str
    checkpoint: str
    sha256: str | None
    reproduce: str
    image: np.ndarray | None = None
    image_name: str = ""


def weights_sha256(checkpoint_dir: str | Path) -> str | None:
    """The sha256 of a checkpoint's weights as recorded in its ``model.json`` (None if absent or unreadable), read
    as the checkpoint is (:func:`laya.model.checkpoint.read_meta`: bounded, its fields checked)."""
    try:
        sha = read_meta(checkpoint_dir).get("weights", {}).get("sha256")
    except (OSError, ValueError):  # CheckpointError is a ValueError
        return None
    return sha if isinstance(sha, str) else None


def png_data_url(pixels: np.ndarray) -> str:
    """``uint8 (H, W)`` or ``(H, W, 3)`` pixels as a ``data:image/png;base64,...`` URL."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _provenance_html(p: Provenance) -> str:
    rows = [("Setting", p.setting), ("Checkpoint", p.checkpoint), ("Weights sha256", p.sha256 or "not recorded"),
            ("Reproduce", p.reproduce)]  # fmt: skip
    parts = ['<dl class="provenance">']
    for key, value in rows:
        value_html = f"<code>{html.escape(value)}</code>" if key in ("Weights sha256", "Reproduce") else html.escape(value)
        parts.append(f"<dt>{key}</dt><dd>{value_html}</dd>")
    parts.append("</dl>")
    if p.image is not None:
        alt = html.escape(f"input {p.image_name}, as the model sees it")
        parts.append(f'<h2>Input: {html.escape(p.image_name)}</h2><img class="input" alt="{alt}" src="{png_data_url(p.image)}">')
    return "\n".join(parts)


def html_report(
    title: str, sections: Sequence[Section], subtitle: str = "", provenance: Provenance | None = None
) -> str:
    """One self-contained HTML page: ``title``, the :class:`Provenance` block (if given), then each
    ``(heading, figure | table | text)`` in order."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(f'<p class="meta">{html.escape(subtitle)} · LAYA dashboard {__version__} · {stamp}</p>')
    if provenance is not None:
        parts.append(_provenance_html(provenance))
    plotly_js: str | bool = True  # embedded with the first figure only
    for heading, content in sections:
        if heading:
            parts.append(f"<h2>{html.escape(heading)}</h2>")
        if isinstance(content, go.Figure):
            # a figure's text as plotly draws it (a name with <a href> would be a link): escaped as on the pages
            parts.append(shown(content, "plotly").to_html(full_html=False, include_plotlyjs=plotly_js))
            plotly_js = False
        elif isinstance(content, pd.DataFrame):
            parts.append(content.to_html(index=False, na_rep="–", float_format=lambda v: f"{v:.4g}", border=0))
        else:
            parts.append(f"<p>{html.escape(str(content))}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


__all__ = ["Provenance", "html_report", "png_data_url", "weights_sha256"]
