"""The server's memory under distinct uploaded checkpoints, and after their sessions end (issue 17, hole 4).

    python benchmarks/upload_memory.py [--uploads 10] [--width 3072]

Writes ``--uploads`` distinct valid checkpoints (the Fashion-MNIST MLP setting with two hidden layers
of ``--width`` units, each from its own seed: ``4 * (784 * w + w²)`` bytes of weights each), starts
the real ``streamlit run app.py`` in deployment mode, and in one browser session after another
uploads one checkpoint and an image and waits for the Inspect charts. Then it closes every browser
and polls until the upload folders are empty and the workers have ended. Printed: the server's
RSS at start, after the uploads and after the sessions ended; the workers' RSS while they held the
models; seconds until clean (upload folders empty, workers ended), and until the server's RSS is back
within 100 MB of its start (Streamlit itself never frees a closed session's uploaded files, streamlit#12506:
the upload sweeper releases them with the session's folders, ``LAYA_UPLOAD_GRACE`` seconds after it
closed). Like the Docker image, it runs the server with ``MALLOC_MMAP_THRESHOLD_=65536``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from laya.model.checkpoint import META_FILE, CheckpointMeta, build_model, save_checkpoint
from scripts.procfs import memory_mb, server_pid, workers
from scripts.screenshots import browser_page, open_app, serve, upload_image, wait_for_charts, wait_idle


def distinct_checkpoints(base: Path, out: Path, n: int, width: int) -> list[Path]:
    """``n`` valid checkpoints of ``base``'s setting with hidden widths ``[width, width]``, seeds 0..n-1."""
    record = json.loads((base / META_FILE).read_text())
    record["backbone"]["widths"] = [width, width]
    record.pop("layer_names", None)
    record["backbone"].pop("layer_names", None)
    meta = CheckpointMeta.from_dict(record)
    paths = []
    for seed in range(n):
        torch.manual_seed(seed)
        paths.append(save_checkpoint(build_model(meta), meta, out / f"upload-{seed}"))
    return paths


def wait_until(condition, timeout: float) -> float:
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"not within {timeout} s")
        time.sleep(0.2)
    return time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--uploads", type=int, default=10)
    parser.add_argument("--width", type=int, default=3072)
    parser.add_argument("--models", type=Path, default=ROOT / "models")
    args = parser.parse_args()
    base = args.models / "fashion-mnist-mlp" / "laya"
    image = sorted((args.models / "fashion-mnist-mlp" / "examples").glob("*.png"))[0]
    work = Path(tempfile.mkdtemp(prefix="laya-upload-memory-"))
    checkpoints = distinct_checkpoints(base, work / "checkpoints", args.uploads, args.width)
    weights_mb = sum((c / "model.safetensors").stat().st_size for c in checkpoints) / 2**20
    (work / "tmp").mkdir()
    os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", "65536")  # as in the Docker image: large frees go back to the OS
    os.environ.update({"LAYA_ALLOW_PATHS": "0", "LAYA_UPLOAD_DIR": str(work / "tmp"), "LAYA_UPLOAD_GRACE": "5",
                       "LAYA_UPLOAD_SWEEP": "1"})  # fmt: skip
    result: dict[str, object] = {"uploads": args.uploads, "weights_mb_total": round(weights_mb)}
    with serve(args.models, log=work / "streamlit.log") as url:
        server = server_pid()
        with browser_page() as first:
            open_app(first, url)
            wait_for_charts(first, 2)
            result["server_rss_start_mb"] = round(memory_mb(server)["rss"])
            pages = []
            for checkpoint in checkpoints:
                page = first.context.browser.new_page()  # a context of its own: a new session
                page.set_default_timeout(180_000)
                open_app(page, url)
                sidebar = page.locator('[data-testid="stSidebar"]')
                sidebar.get_by_text("Upload a checkpoint").click()
                wait_idle(page)
                files = [str(checkpoint / "model.json"), str(checkpoint / "model.safetensors")]
                sidebar.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(files)
                sidebar.locator('[data-testid="stFileChip"]').nth(len(files) - 1).wait_for()
                wait_idle(page)
                upload_image(page, image)
                wait_for_charts(page, 2)
                pages.append(page)
            held = workers(server)
            result["server_rss_after_uploads_mb"] = round(memory_mb(server)["rss"])
            result["server_peak_mb"] = round(memory_mb(server)["peak"])
            result["workers"] = len(held)
            result["workers_rss_mb"] = round(sum(memory_mb(pid)["rss"] for pid in held))
            for page in pages:
                page.context.close()  # that browser session ends: its websocket closes
            uploads = work / "tmp"
            result["seconds_until_clean"] = round(
                wait_until(lambda: not any(uploads.glob("laya-uploads-*/upload-*")) and not workers(server), 120), 1
            )
            result["server_rss_when_clean_mb"] = round(memory_mb(server)["rss"])
            # the sweeper released the closed sessions' uploaded bytes; the allocator returns them to the OS
            settled = lambda: memory_mb(server)["rss"] <= result["server_rss_start_mb"] + 100  # noqa: E731
            try:
                result["seconds_until_baseline"] = round(wait_until(settled, 300), 1)
            except TimeoutError:
                result["seconds_until_baseline"] = None
            result["server_rss_end_mb"] = round(memory_mb(server)["rss"])
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
