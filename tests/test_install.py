"""``pip install <wheel>`` outside the checkout gives the library, the CLI and ``laya dashboard``.

The wheel is built offline (``pip wheel --no-deps --no-build-isolation``) and installed into a fresh
virtualenv in a temporary folder, whose only other packages are this environment's (a ``.pth`` file,
so nothing is downloaded). From outside the checkout, ``laya dashboard --models <tiny models>``
must answer HTTP 200, and the installed app (``laya/_app/app.py`` of the wheel) must render its
first page with AppTest; a bare ``laya dashboard`` opens the demo that ships in the wheel, whose
Inspect page renders its charts in Chromium, and the README's library example runs from the wheel.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import textwrap
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.install
TIME_BOX_S = 240
CPU_ROUTE_S = 900  # the CPU install: 38-840 s measured on 2 shared cores (docs/install/cpu.json)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(argv: list[str], cwd: Path, **kwargs) -> str:
    done = subprocess.run(argv, check=False, cwd=cwd, capture_output=True, text=True, timeout=TIME_BOX_S, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, argv))}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done.stdout


def _wait_healthy(server: subprocess.Popen, port: int) -> None:
    """Until the dashboard on ``port`` answers its health check (at most ``TIME_BOX_S``)."""
    from scripts.screenshots import _wait_healthy as wait

    wait(server, f"http://127.0.0.1:{port}", TIME_BOX_S)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv outside the checkout with the wheel of this checkout installed."""
    work = tmp_path_factory.mktemp("install")
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(work), str(REPO)],
        work,
    )
    (wheel,) = work.glob("laya-*.whl")
    env_dir = work / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], work)
    python = env_dir / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], work).strip())
    (site / "_parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # dependencies, not laya
    _run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], work)
    return env_dir


def test_installed_laya_is_the_wheel_and_carries_the_app(venv: Path):
    out = _run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import laya, laya.dashboard as d; print(laya.__file__); print(d.app_dir())",
        ],
        venv,
    )
    module, app = out.split()
    assert Path(module).is_relative_to(venv) and Path(app) == Path(module).parent / "_app"
    packaged = {str(p.relative_to(app)) for p in (Path(app) / "pages").rglob("*.py")}
    assert packaged == {str(p.relative_to(REPO)) for p in (REPO / "pages").rglob("*.py")}
    assert "dashboard" in _run([str(venv / "bin" / "laya"), "--help"], venv)


def test_laya_dashboard_serves_and_renders_outside_the_checkout(venv: Path, tiny_models: Path, image_folder: Path):
    port = _free_port()
    env = {**os.environ, "LAYA_PATH_ROOTS": str(image_folder), "PYTHONPATH": ""}
    server = subprocess.Popen(
        [str(venv / "bin" / "laya"), "dashboard", "--models", str(tiny_models), "--port", str(port), "--address", "127.0.0.1"],
        cwd=venv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        _wait_healthy(server, port)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as page:
            status, html = page.status, page.read().decode()
        assert status == 200 and "<title>" in html and "streamlit" in html.lower()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    script = textwrap.dedent(
        f"""
        from streamlit.testing.v1 import AppTest
        import laya.dashboard as d
        at = AppTest.from_file(str(d.app_dir() / "app.py"), default_timeout={TIME_BOX_S}).run()
        assert not at.exception, at.exception
        print("|".join(t.value for t in at.title) or "-", "|".join(s.label for s in at.selectbox))
        """
    )
    out = _run([str(venv / "bin" / "python"), "-c", script], venv, env={**env, "LAYA_MODELS": str(tiny_models)})
    assert "Inspect" in out or "colours" in out.lower(), out


def test_readme_library_example_runs_from_the_wheel(venv: Path):
    """The README's ten lines, outside the checkout: the demo checkpoint and its example ship in the wheel."""
    from tests.docs.doc_commands import extract

    (program,) = [c for c in extract(REPO / "README.md") if c.language == "python"]
    out = _run([str(venv / "bin" / "python"), "-c", program.text], venv, env={**os.environ, "PYTHONPATH": ""})
    assert out.split()[0] in {"T-shirt/top", "Shirt", "Pullover", "Dress", "Coat"}, out


def test_bare_laya_dashboard_opens_the_demo_and_renders_inspect_in_a_browser(venv: Path):
    """No --models, no checkout: the wheel's demo; the Inspect page draws its plotly charts in Chromium."""
    _demo_renders_inspect_in_chromium(venv)


@pytest.mark.slow
def test_cpu_route_installs_no_cuda_wheels_and_opens_the_demo(tmp_path: Path):
    """docs/installing.md's CPU route run by ``scripts/install_size.sh cpu`` on this checkout's wheel: no nvidia-*
    or triton package, a CPU torch, and the installed ``laya dashboard`` renders the demo's Inspect in Chromium.
    Offline only with local CPU wheels: ``TORCH_CPU`` names them as pip arguments (skipped without it)."""
    if not os.environ.get("TORCH_CPU"):
        pytest.skip("TORCH_CPU is not set: name local CPU torch/torchvision wheels (pip arguments) to run offline")
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path),
          str(REPO)], tmp_path)  # fmt: skip
    (wheel,) = tmp_path.glob("laya-*.whl")
    done = subprocess.run(["bash", str(REPO / "scripts" / "install_size.sh"), "cpu", str(wheel), str(tmp_path / "cpu.json")],
                          cwd=tmp_path, env={**os.environ, "TMPDIR": str(tmp_path)}, capture_output=True, text=True,
                          timeout=CPU_ROUTE_S, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "cpu.json").read_text())
    assert record["cuda_packages"] == 0 and record["torch"].endswith("+cpu"), record
    (venv,) = [Path(line.split()[-1]) for line in done.stdout.splitlines() if line.startswith("venv kept at ")]
    _demo_renders_inspect_in_chromium(venv)


def _demo_renders_inspect_in_chromium(venv: Path) -> None:
    """``venv/bin/laya dashboard`` with no --models (the demo in the wheel) prints the local URL it serves, and
    its Inspect page draws at least two plotly charts in Chromium, with no "Page not found"."""
    from scripts.screenshots import CHROMIUM, CHARTS_SETTLED, TIMEOUT_MS, browser_page

    if not Path(CHROMIUM).is_file():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (make system-deps) to run the browser test")
    from playwright.sync_api import expect

    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "LAYA_MODELS"} | {"PYTHONPATH": ""}
    server = subprocess.Popen(
        [str(venv / "bin" / "laya"), "dashboard", "--port", str(port)],
        cwd=venv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        said = server.stdout.readline()
        assert said.startswith(f"LAYA dashboard on http://127.0.0.1:{port} ") and "_demo" in said, said
        _wait_healthy(server, port)
        expect.set_options(timeout=TIMEOUT_MS)
        with browser_page() as page:
            page.goto(f"http://127.0.0.1:{port}/inspect-input")
            main = page.locator('[data-testid="stMain"]')
            expect(main.locator("h1", has_text="Inspect an input").first).to_be_visible()
            expect(page.locator('[data-testid="stSidebar"]')).to_contain_text("LAYA · acc")  # the demo's heads
            expect(main.locator(".stPlotlyChart .main-svg").first).to_be_visible()
            page.wait_for_function(CHARTS_SETTLED)
            assert main.locator(".stPlotlyChart").count() >= 2
            assert page.get_by_text("Page not found").count() == 0
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


@pytest.mark.parametrize("torch_version, torchvision_version", [("2.13.0", "0.28.0"), ("2.14.1", "0.29.1")])
def test_requirements_admit_the_measured_torch_pairs(torch_version: str, torchvision_version: str):
    """requirements.txt admits the CPU route's pair (torch 2.13 + torchvision 0.28) and the tested one."""
    from packaging.requirements import Requirement

    wanted = {"torch": torch_version, "torchvision": torchvision_version}
    lines = [line.split("#")[0].strip() for line in (REPO / "requirements.txt").read_text().splitlines()]
    found = {r.name: r for r in map(Requirement, filter(None, lines)) if r.name in wanted}
    assert set(found) == set(wanted) and all(found[n].specifier.contains(v) for n, v in wanted.items()), found
