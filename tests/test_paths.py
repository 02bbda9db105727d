"""laya.paths.canonical_path: property tests over hostile path texts (issue 17, hole 1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from laya.paths import PathRefused, canonical_path, inside

PARTS = st.one_of(
    st.sampled_from(["~", "~root", "~nobody", "..", ".", "", "a", "in-link", "out-link", "é", "ü" * 130, "x" * 256]),
    st.sampled_from(["a\x00b", "\ud800", "model.json", "proc", "self", "environ", "etc", "passwd"]),
    st.text(min_size=1, max_size=12),
)
TEXTS = st.builds(lambda lead, parts: lead + "/".join(parts), st.sampled_from(["", "/", "~/", "~root/"]), st.lists(PARTS, max_size=8))


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``root`` holding a file, a link to it and a link leaving the root; ``outside`` beside it."""
    base = tmp_path_factory.mktemp("paths")
    root, outside = base / "root", base / "outside"
    (root / "a").mkdir(parents=True)
    outside.mkdir()
    (root / "a" / "model.json").write_text("{}")
    (outside / "secret").write_text("secret")
    (root / "in-link").symlink_to(root / "a")
    (root / "out-link").symlink_to(outside)
    return root, outside


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXTS)
def test_every_accepted_path_is_inside_the_root_and_is_its_own_real_path(text: str, tree) -> None:
    root, _ = tree
    try:
        path = canonical_path(text, root, [root])
    except PathRefused as error:
        message = str(error)
        assert str(root) not in message and str(Path.home()) not in message  # no server path in the refusal
        return
    assert path == Path(os.path.realpath(path))  # nothing left to expand between the check and the open
    assert path.is_relative_to(os.path.realpath(root))
    assert not text.startswith("~") and "\x00" not in text


@settings(max_examples=200, deadline=None)
@given(rest=st.text(max_size=40))
def test_tilde_is_never_expanded(rest: str) -> None:
    for text in ("~" + rest, "~/" + rest, "~root/" + rest):
        with pytest.raises(PathRefused):
            canonical_path(text, Path("/"), None)  # refused even without roots: ~ is never a home folder


def test_symlinks_are_resolved_before_the_containment_test(tree) -> None:
    root, outside = tree
    assert canonical_path("in-link/model.json", root, [root]) == (root / "a" / "model.json").resolve()
    for text in ("out-link/secret", str(root / "out-link" / "secret"), "a/../../outside/secret"):
        with pytest.raises(PathRefused, match="outside the folders allowed here"):
            canonical_path(text, root, [root])
    assert not inside("out-link", [root], root) and inside("in-link", [root], root)


def test_refusals_are_not_an_existence_oracle(tree) -> None:
    """An existing and a missing server file get the same refusal, word for word but for the quoted text."""
    root, outside = tree
    pairs = [
        ("~/../etc/passwd", "~/../etc/no-such-file"),
        (str(outside / "secret"), str(outside / "nothere")),
        ("../outside/secret", "../outside/nothere"),
        ("out-link/secret", "out-link/nothere"),
    ]
    for there, missing in pairs:
        messages = []
        for text in (there, missing):
            with pytest.raises(PathRefused) as refused:
                canonical_path(text, root, [root])
            messages.append(str(refused.value).replace(repr(text), "<path>"))
        assert messages[0] == messages[1]


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("", "empty"),
        ("a\x00b", "NUL"),
        ("a/\ud800", "lone surrogate"),
        ("x" * 256, "over 255 bytes"),
        ("a/" * 2100, "at most 4096"),
        ("~", "starts with '~'"),
        ("~root/.ssh", "starts with '~'"),
    ],
)
def test_each_rule_has_its_own_message(text: str, rule: str, tree) -> None:
    root, _ = tree
    with pytest.raises(PathRefused, match=rule):
        canonical_path(text, root, [root])


def test_unicode_names_inside_the_root_are_fine(tree) -> None:
    root, _ = tree
    (root / "é ü 名前").mkdir(exist_ok=True)
    assert canonical_path("é ü 名前", root, [root]) == (root / "é ü 名前").resolve()
