"""laya.settings: one table of the LAYA_* variables, one parser that refuses a bad value by name, and the only
reader of them in laya/, app.py and pages/."""

import ast
import os
import re
from pathlib import Path

import pytest

from laya import settings
from laya.settings import SETTINGS, SettingError

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [*sorted((ROOT / "laya").rglob("*.py")), ROOT / "app.py", *sorted((ROOT / "pages").rglob("*.py"))]


def test_unset_and_empty_take_the_default_and_values_parse_by_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    assert settings.integer("LAYA_MAX_PARAMS") == 500_000_000 and settings.number("LAYA_WORKER_TIMEOUT") == 120.0
    assert settings.flag("LAYA_ALLOW_PATHS") and not settings.flag("LAYA_ALLOW_IMPORT")
    assert settings.path("LAYA_UPLOAD_DIR") is None and settings.paths("LAYA_PATH_ROOTS") == []
    assert settings.path("LAYA_CACHE") == Path.home() / ".cache" / "laya"
    assert settings.text("LAYA_DEVICE") == "auto" and settings.text("LAYA_SANDBOX") == ""
    assert 1 <= settings.integer("LAYA_THREADS") <= 4
    monkeypatch.setenv("LAYA_MAX_PARAMS", " 1_000 ")
    monkeypatch.setenv("LAYA_WORKER_TIMEOUT", "")
    monkeypatch.setenv("LAYA_MAX_CHECKPOINT_MB", "3.0")
    monkeypatch.setenv("LAYA_PATH_ROOTS", os.pathsep.join(["/a", "", "/b"]))
    monkeypatch.setenv("LAYA_SANDBOX", " ALL ")
    assert settings.integer("LAYA_MAX_PARAMS") == 1000 and settings.number("LAYA_WORKER_TIMEOUT") == 120.0
    assert settings.integer("LAYA_MAX_CHECKPOINT_MB") == 3
    assert settings.paths("LAYA_PATH_ROOTS") == [Path("/a"), Path("/b")] and settings.text("LAYA_SANDBOX") == "all"


@pytest.mark.parametrize("value, on", [("1", True), ("yes", True), (" On ", True), ("0", False), ("off", False),
                                       ("", False), ("FALSE", False)])  # fmt: skip
def test_a_flag_reads_the_usual_words_and_an_empty_flag_is_off(monkeypatch, value: str, on: bool) -> None:
    monkeypatch.setenv("LAYA_ALLOW_PATHS", value)
    assert settings.flag("LAYA_ALLOW_PATHS") is on


@pytest.mark.parametrize(
    "name, value, expected",
    [("LAYA_WORKERS", "two", "a whole number ≥ 1"), ("LAYA_WORKERS", "0", "a whole number ≥ 1"),
     ("LAYA_WORKERS", "1.5", "a whole number ≥ 1"), ("LAYA_WORKER_TIMEOUT", "0", "a number > 0"),
     ("LAYA_UPLOAD_TTL", "nan", "a number > 0"), ("LAYA_UPLOAD_CAP_MB", "-1", "a number ≥ 0"),
     ("LAYA_MAX_GFLOPS", "inf", "a number > 0"), ("LAYA_ALLOW_PATHS", "maybe", "1 or 0"),
     ("LAYA_SANDBOX", "bundled", "empty or all")],
)  # fmt: skip
def test_a_bad_value_is_refused_naming_the_variable_what_was_expected_and_what_arrived(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, expected: str
) -> None:
    monkeypatch.setenv(name, value)
    read = {"integer": settings.integer, "number": settings.number, "flag": settings.flag, "text": settings.text}
    with pytest.raises(SettingError, match=re.escape(f"{name}={value!r}: expected {expected}")):
        read[SETTINGS[name].kind](name)


def test_a_variable_is_read_as_its_own_kind_only() -> None:
    with pytest.raises(TypeError, match="LAYA_WORKERS is a setting of kind 'integer', read as 'flag'"):
        settings.flag("LAYA_WORKERS")


def test_the_budget_refuses_a_bad_limit_as_a_checkpoint_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from laya.model.limits import limits
    from laya.model.checkpoint import CheckpointError

    monkeypatch.setenv("LAYA_MAX_ACTIVATIONS", "lots")
    with pytest.raises(CheckpointError, match="LAYA_MAX_ACTIVATIONS='lots': expected a whole number ≥ 1"):
        limits()


def _env_reads(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line`` of every ``os.environ.get(...)``, ``os.getenv(...)`` and ``os.environ[...]`` read whose key
    is a ``LAYA_*`` string or not a string at all (a variable could hold a LAYA_ name)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            target = ast.unparse(node.func)
            if target in ("os.environ.get", "os.getenv", "environ.get", "getenv", "os.environ.pop"):
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if ast.unparse(node.value) in ("os.environ", "environ"):
                key = node.slice
        if key is not None and not (isinstance(key, ast.Constant) and not str(key.value).startswith("LAYA_")):
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_only_laya_settings_reads_laya_variables_from_the_environment() -> None:
    reads = [hit for path in SOURCES if path != ROOT / "laya" / "settings.py" for hit in _env_reads(path)]
    assert reads == [], "read LAYA_* through laya.settings:\n" + "\n".join(reads)


def test_the_reader_check_can_fail(tmp_path: Path) -> None:
    (tmp_path / "laya").mkdir()
    bad = tmp_path / "laya" / "x.py"
    bad.write_text('import os\nname = "LAYA_X"\na = os.environ.get("LAYA_Y", 1)\nb = os.environ[name]\n'
                   'c = os.environ.get("HOME")\nos.environ["LAYA_Z"] = "1"\n')  # fmt: skip
    assert _env_reads(bad, tmp_path) == ["laya/x.py:3", "laya/x.py:4"]


def test_every_laya_variable_the_code_names_is_in_the_table() -> None:
    named = {m for path in SOURCES for m in re.findall(r"\bLAYA_[A-Z_]+[A-Z]\b", path.read_text())}
    assert named - set(SETTINGS) == set()
    assert len(SETTINGS) == 29
