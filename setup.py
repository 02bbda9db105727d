"""Build step only (metadata lives in pyproject.toml): the wheel carries the dashboard and a demo.

``app.py``, ``pages/**/*.py`` and ``.streamlit/config.toml`` of the checkout are copied into
``laya/_app/`` of the build, where ``laya dashboard`` (laya/dashboard.py) finds them. The demo
checkpoints (``DEMO``: one bundled setting, two of its heads) are copied into ``laya/_demo/``, where
``laya.demo`` finds them (docs/decisions/demo-in-the-wheel.md).
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
APP_FILES = [
    "app.py",
    ".streamlit/config.toml",
    *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "pages").rglob("*.py"))),
]
DEMO = {"setting": "fashion-mnist-mlp", "heads": ("laya", "lastlayer")}


def copy_demo(models: Path, target: Path) -> None:
    """The demo setting's own files and examples, and the checkpoint folders of ``DEMO["heads"]``."""
    setting = models / DEMO["setting"]
    for path in sorted(setting.iterdir()):
        if path.is_file() or path.name == "examples" or path.name in DEMO["heads"]:
            dest = target / DEMO["setting"] / path.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(path, dest) if path.is_dir() else shutil.copy2(path, dest)


class BuildWithApp(build_py):
    def run(self) -> None:
        shutil.rmtree(self.build_lib, ignore_errors=True)  # no stale modules of an earlier build in the wheel
        super().run()
        target = Path(self.build_lib) / "laya" / "_app"
        for name in APP_FILES:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
        copy_demo(ROOT / "models", Path(self.build_lib) / "laya" / "_demo")


setup(cmdclass={"build_py": BuildWithApp})
