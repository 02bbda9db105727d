"""laya.app.labels: the names the dashboard gives heads, methods and catalog entries."""

from __future__ import annotations

from pathlib import Path

from laya.app.catalog import Entry, find_checkpoints
from laya.app.labels import entry_label, head_title, method_label


def test_labels_mark_posthoc_methods() -> None:
    assert method_label("integrated_gradients") == "Integrated Gradients (baseline: training mean) (post-hoc)"
    assert method_label("saliency").endswith("(post-hoc)")
    assert method_label("laya_alpha") == "LAYA α (intrinsic)"
    assert head_title("lastlayer") == "LastLayer" and head_title("other") == "other"


def test_catalog_labels(tiny_models: Path) -> None:
    entries = find_checkpoints(tiny_models)
    broken = Entry(Path("/x/broken"), "unreadable", "?", "?", "?", None, None, None, error="damaged")
    laya = entries[3]
    assert entry_label(laya) == f"LAYA · acc {laya.accuracy:.3f} · faithfulness ρε {laya.faithfulness:.2f}"
    assert (
        entry_label(entries[0])
        == f"LastLayer · acc {entries[0].accuracy:.3f} · faithfulness n/a (one informative layer)"
    )
    assert entries[0].faithfulness is None  # never 1.000
    assert entry_label(broken) == "broken: unreadable"
