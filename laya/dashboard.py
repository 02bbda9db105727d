"""``laya dashboard``: the Streamlit app of a checkout (``app.py`` + ``pages/``), from anywhere.

A checkout runs its own top-level ``app.py``. A wheel carries a copy of ``app.py``, ``pages/`` and
``.streamlit/config.toml`` in ``laya/_app/`` (copied by ``setup.py`` when the wheel is built), so
``pip install .`` then ``laya dashboard --models DIR`` starts the same app as ``streamlit run app.py``.
The settings of ``.streamlit/config.toml`` are passed as flags, since Streamlit reads that file only
from the working directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PACKAGED = Path(__file__).resolve().parent / "_app"
CHECKOUT = Path(__file__).resolve().parents[1]


def app_dir() -> Path:
    """The folder holding ``app.py`` and ``pages/``: the wheel's copy, else the checkout this laya came from."""
    for folder in (PACKAGED, CHECKOUT):
        if (folder / "app.py").is_file() and (folder / "pages").is_dir():
            return folder
    raise FileNotFoundError(
        f"the dashboard's app.py is neither in {PACKAGED} (a wheel) nor in {CHECKOUT} (a checkout); reinstall laya"
    )


def config_flags(config: Path) -> list[str]:
    """``.streamlit/config.toml`` as ``--section.option=value`` flags (none where tomllib is missing)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: Streamlit's defaults
        return []
    if not config.is_file():
        return []
    settings = tomllib.loads(config.read_text())
    return [
        f"--{section}.{key}={str(value).lower() if isinstance(value, bool) else value}"
        for section, options in settings.items()
        for key, value in options.items()
    ]


def default_models() -> Path:
    """``$LAYA_MODELS``, else ``models/`` in the working directory, else the checkout's ``models/``."""
    if os.environ.get("LAYA_MODELS"):
        return Path(os.environ["LAYA_MODELS"])
    for folder in (Path("models"), CHECKOUT / "models"):
        if folder.is_dir():
            return folder
    raise FileNotFoundError("no models/ folder here; give one with --models DIR (a folder of LAYA checkpoints)")


def command(
    models: Path | None = None, port: int = 8501, address: str | None = None, allow_import: bool = False
) -> tuple[list[str], dict]:
    """The ``streamlit run`` command line and environment that ``laya dashboard`` runs."""
    folder = Path(models) if models is not None else default_models()
    if not folder.is_dir():
        raise FileNotFoundError(f"--models {folder}: no such folder (give a folder of LAYA checkpoints)")
    app = app_dir()
    argv = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app / "app.py"),
        *config_flags(app / ".streamlit" / "config.toml"),
    ]
    argv += [f"--server.port={port}"] + ([f"--server.address={address}"] if address else [])
    env = {**os.environ, "LAYA_MODELS": str(folder.resolve())}
    if allow_import:  # wrapped-module checkpoints of this folder may import their code (never uploads)
        env["LAYA_ALLOW_IMPORT"] = "1"
    return argv, env


def run(models: Path | None = None, port: int = 8501, address: str | None = None, allow_import: bool = False) -> int:
    """Start the dashboard (blocks until it stops); returns Streamlit's exit status."""
    argv, env = command(models, port, address, allow_import)
    print(f"LAYA dashboard on http://localhost:{port} (checkpoints: {env['LAYA_MODELS']})", flush=True)
    try:
        return subprocess.call(argv, env=env)
    except KeyboardInterrupt:
        return 0


__all__ = ["app_dir", "command", "config_flags", "default_models", "run"]
