"""Every url path of app.py has its first-run alias pages/<url path>.py (pages/common/routes.py)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def url_paths() -> set[str]:
    tree = ast.parse((ROOT / "app.py").read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "Page"]
    found = {k.value.value for c in calls for k in c.keywords if k.arg == "url_path"}
    defaults = {k.value.value for c in calls for k in c.keywords if k.arg == "url_path" and any(
        d.arg == "default" and getattr(d.value, "value", False) for d in c.keywords)}  # fmt: skip
    return found - defaults  # the default page is served at "/", never at its url path


def test_every_url_path_has_its_alias_and_every_alias_a_url_path():
    paths = url_paths()
    assert {"compare-heads", "inspect-input", "activation-patching"} <= paths
    aliases = {p.stem for p in (ROOT / "pages").glob("*-*.py")}
    assert aliases == paths
    for name in paths:
        body = (ROOT / "pages" / f"{name}.py").read_text()
        assert "from pages.common.routes import run_app" in body and body.rstrip().endswith("run_app()")
