"""Untrusted text on a page: shown as plain text, never as Markdown or HTML, and without server paths.

Every string that comes from a checkpoint (class names, dataset, layer names, messages that quote its
values) or from a visitor (file names) goes through :func:`plain` before it reaches a Streamlit element
that renders Markdown (``st.markdown``, ``st.caption``, ``st.error``/``warning``/``info``/``success``,
titles, widget labels). ``![x](http://host/pixel.png)`` as a class name then shows those characters
instead of making every visitor's browser fetch the image. Messages shown to visitors also go through
:func:`public`, which names an uploaded checkpoint "the uploaded checkpoint" and, in deploy mode
(``LAYA_ALLOW_PATHS=0``), replaces the server's folders by their last name (``models``).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from laya.app import deploy

# ASCII punctuation that Markdown, GitHub-flavoured Markdown or Streamlit's extensions give a meaning
# (images, links, emphasis, code, HTML, tables, strike-through, LaTeX, :emoji: and :color[...] directives)
MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+!|<>~$:&])")
UPLOADED = "the uploaded checkpoint"


def plain(text: object) -> str:
    """``text`` with every Markdown-active character backslash-escaped, so it renders literally.

    >>> plain("![x](http://host/p.png)")
    '\\\\!\\\\[x\\\\]\\\\(http\\\\://host/p.png\\\\)'
    """
    return MARKDOWN.sub(r"\\\1", str(text))


def unplain(text: str) -> str:
    """Inverse of :func:`plain` (for tests and for comparing what a page shows with a message)."""
    return re.sub(r"\\(.)", r"\1", text)


def _variants(path: Path) -> list[str]:
    return sorted({str(path), os.path.realpath(path)}, key=len, reverse=True)


def public(text: object, upload_root: Path | None = None) -> str:
    """``text`` without server paths: an upload's folder becomes :data:`UPLOADED`; in deploy mode
    (:func:`laya.app.deploy.allow_paths` off) the models folder, the path and data roots, the temporary
    folder and the home folder become their last name."""
    text = str(text)
    root = upload_root if upload_root is not None else deploy.upload_store().root
    for variant in _variants(root):
        text = re.sub(re.escape(variant) + r"(/[^/\s'\"`);,]+)?(/[^\s'\"`);,]*)?", UPLOADED, text)
    if deploy.allow_paths():
        return text
    folders = [deploy.models_root(), *deploy.path_roots(), *deploy.data_roots(), Path(tempfile.gettempdir()), Path.home()]
    pairs = sorted(((v, Path(v).name or "/") for f in folders for v in _variants(f)), key=lambda p: -len(p[0]))
    for variant, name in pairs:
        if variant not in ("/", ""):
            text = text.replace(variant, name)
    return text


def shown(text: object) -> str:
    """:func:`plain` of :func:`public`: what every untrusted message on a page goes through."""
    return plain(public(text))


__all__ = ["UPLOADED", "plain", "public", "shown", "unplain"]
