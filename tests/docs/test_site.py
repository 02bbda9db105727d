"""The docs site builds strictly: broken links, missing anchors and pages outside the nav fail the build."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed: `pip install -r requirements-docs.txt` (make test installs it)")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=config.parent, capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300)  # fmt: skip


def test_site_builds_strictly(tmp_path):
    done = _mkdocs(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "results" / "index.html").is_file()
    # API pages come from the docstrings (mkdocstrings): the re-exports and every subpackage's modules
    api = {page: (tmp_path / "site" / "api" / page / "index.html").read_text() for page in ("model", "analysis")}
    assert 'id="laya.model.heads.LayaHead"' in api["model"] and "softmax" in api["model"]
    assert 'id="laya.analysis.head.ablation.leave_one_out"' in api["analysis"]
    assert 'id="laya.load_checkpoint"' in (tmp_path / "site" / "api" / "index.html").read_text()


def test_broken_links_fail_the_build(tmp_path):
    """The repository's mkdocs.yml (strict, validation), on two pages: a broken link, a missing anchor, an
    orphan page."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config.pop("plugins", None)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[gone](gone.md) [anchor](other.md#nope)\n")
    (docs / "other.md").write_text("# Other\n")
    (docs / "orphan.md").write_text("# Orphan\n")
    config.update(docs_dir="docs", nav=[{"Home": "index.md"}, {"Other": "other.md"}])
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config, allow_unicode=True))
    done = _mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    for problem in ("'gone.md'", "'#nope'", "orphan.md"):
        assert problem in done.stderr, done.stderr[-2000:]
