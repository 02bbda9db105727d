"""Build step only (metadata lives in pyproject.toml): the wheel carries the dashboard's entry points.

``app.py``, ``pages/**/*.py`` and ``.streamlit/config.toml`` of the checkout are copied into
``laya/_app/`` of the build, where ``laya dashboard`` (laya/dashboard.py) finds them.
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


class BuildWithApp(build_py):
    def run(self) -> None:
        shutil.rmtree(self.build_lib, ignore_errors=True)  # no stale modules of an earlier build in the wheel
        super().run()
        target = Path(self.build_lib) / "laya" / "_app"
        for name in APP_FILES:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)


setup(cmdclass={"build_py": BuildWithApp})
