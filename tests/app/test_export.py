"""laya.app.export: the static HTML report carries the input, the setting, the weights' hash and the link."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from laya.model.checkpoint import META_FILE


def test_html_export_carries_input_setting_hash_and_link(setting: Path) -> None:
    import base64
    import io

    from PIL import Image

    from laya.app.export import Provenance, html_report, weights_sha256

    sha = weights_sha256(setting / "laya")
    assert sha == json.loads((setting / "laya" / META_FILE).read_text())["weights"]["sha256"]
    pixels = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
    source = Provenance("colours · mlp", "colours / mlp / laya", sha, "http://host/?head=laya&mode=mean", pixels, "red.png")
    page = html_report("Inspect: red.png", [("Table", pd.DataFrame({"a": [1]}))], "sub", source)
    assert "colours · mlp" in page and sha in page and "http://host/?head=laya&amp;mode=mean" in page
    encoded = page.split('src="data:image/png;base64,')[1].split('"')[0]
    assert (np.asarray(Image.open(io.BytesIO(base64.b64decode(encoded)))) == pixels).all()
    assert weights_sha256(setting / "nothing") is None
