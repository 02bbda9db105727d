"""``laya dashboard``: the Streamlit app of a checkout (``app.py`` + ``pages/``), from anywhere.

A checkout runs its own top-level ``app.py``. A wheel carries a copy of ``app.py``, ``pages/`` and
``.streamlit/config.toml`` in ``laya/_app/`` (copied by ``setup.py`` when the wheel is built), so
``pip install .`` then ``laya dashboard --models DIR`` starts the same app as ``streamlit run app.py``;
with no ``--models`` it opens the demo checkpoints (:mod:`laya.demo`). The settings of
``.streamlit/config.toml`` are passed as flags, since Streamlit reads that file only from the working
directory. The server listens on 127.0.0.1 unless ``bind_all`` (TensorBoard's ``--bind_all``) shares it
on every interface; SIGTERM and SIGINT are forwarded to the Streamlit child, and ``run`` returns when it
has exited. The child ends with the launcher whatever ends it, SIGKILL included (:mod:`laya.dashboard_child`).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from laya import settings
from laya.demo import demo_models

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
    """``$LAYA_MODELS``, else ``models/`` in the working directory, else the demo (:func:`laya.demo.demo_models`:
    the wheel's demo checkpoints, or a checkout's ``models/``)."""
    return settings.path("LAYA_MODELS") or (Path("models") if Path("models").is_dir() else demo_models())


LOCAL = "127.0.0.1"


def listen_address(address: str | None = None, bind_all: bool = False) -> str | None:
    """The interface to listen on: ``address``, else 127.0.0.1; None with ``bind_all`` (every interface)."""
    if bind_all and address:
        raise ValueError(f"--bind-all shares the dashboard on every interface; it excludes --address {address}")
    return None if bind_all else address or LOCAL


def url(port: int, address: str | None) -> str:
    """The URL the server answers on: this host's name when it listens on every interface (``address`` None)."""
    host = socket.gethostname() if address in (None, "", "0.0.0.0", "::") else address  # noqa: S104 - names the wildcard
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def command(
    models: Path | None = None,
    port: int = 8501,
    address: str | None = LOCAL,
    allow_import: bool = False,
) -> tuple[list[str], dict]:
    """The ``streamlit run`` command line and environment that ``laya dashboard`` runs (``address`` None:
    every interface)."""
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


def run(
    models: Path | None = None,
    port: int = 8501,
    address: str | None = LOCAL,
    allow_import: bool = False,
) -> int:
    """Start the dashboard and block until its Streamlit child exits; returns its exit status (128 + N for a
    child ended by signal N). SIGTERM and SIGINT are passed on to the child, which shuts down with them; a
    launcher ended otherwise (SIGKILL) takes the child with it (:mod:`laya.dashboard_child`)."""
    argv, env = command(models, port, address, allow_import)
    argv = [argv[0], "-m", "laya.dashboard_child", str(os.getpid()), *argv[3:]]  # `streamlit run ...`, guarded
    where = "every interface" if address is None else address
    print(f"LAYA dashboard on {url(port, address)} (listening on {where}; checkpoints: {env['LAYA_MODELS']})",
          flush=True)  # fmt: skip
    child = subprocess.Popen(argv, env=env)

    def forward(signum: int, _frame) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        status = child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if child.poll() is None:  # this process is ending for another reason: never leave the server behind
            child.kill()
            child.wait()
    return 128 - status if status < 0 else status


__all__ = ["LOCAL", "app_dir", "command", "config_flags", "default_models", "listen_address", "run", "url"]
