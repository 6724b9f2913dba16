"""Check in a real headless browser that `hwnas dashboard` shows a run: its note (settings,
run folder, summary) and its files as downloadable Study Artifacts.

Runs a small search on the recorded pixel3 table (its own HWNAS_HOME, so nothing of the user's
is touched) unless --storage names studies already there, starts `hwnas dashboard` on a free
port, waits for /api/meta, checks over the API that every artifact downloads byte-identical to
its run-folder file, and screenshots with Chromium the study's note page and its study
page (whose end lists the Study Artifacts):

    python experiments/dashboard_screenshot.py --out /tmp/dashboard.png

prints one table row per artifact (file, bytes, served identical) and the screenshot paths.
Needs a `chromium` (or `chromium-browser`, `google-chrome`) on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 5):
    with urllib.request.urlopen(url, timeout=timeout) as f:
        return f.read()


def screenshot(browser: str, url: str, png: Path, profile: Path, height: int = 900) -> None:
    """One headless Chromium screenshot of ``url`` (1280 wide), after 15 s of virtual time."""
    subprocess.run(
        [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={profile}", f"--window-size=1280,{height}",
            "--virtual-time-budget=15000", f"--screenshot={png}", url,
        ],
        check=True, capture_output=True, timeout=180,
    )  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("dashboard.png"), help="screenshot (PNG)")
    ap.add_argument("--budget", type=int, default=20, help="trials of the demo search")
    args = ap.parse_args()
    browser = next(
        (b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None
    )
    if browser is None:
        print("no chromium on PATH", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="hwnas-dashboard-"))
    env = {**os.environ, "HWNAS_HOME": str(work / "home")}
    run = work / "run"
    started = time.time()
    r = subprocess.run(
        [sys.executable, "-m", "hwnas", "search", "--device", "pixel3", "--budget",
         str(args.budget), "--out", str(run), "--json"],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    summary = json.loads(r.stdout)
    print(f"search: {time.time() - started:.1f} s, {summary['zoo_models']} zoo models, {run}")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hwnas", "dashboard", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                get(f"{base}/api/meta", timeout=2)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.3)
        study = json.loads(get(f"{base}/api/studies"))["study_summaries"][0]
        sid = study["study_id"]
        detail = json.loads(get(f"{base}/api/studies/{sid}"))
        print(f"{'artifact':<44} {'bytes':>9}  served identical")
        ok = True
        for a in sorted(detail["artifacts"], key=lambda a: a["filename"]):
            rel = a["filename"].replace("__", "/")
            body = get(f"{base}/artifacts/{sid}/{a['artifact_id']}")
            same = body == (run / rel).read_bytes()
            ok &= same
            print(f"{a['filename']:<44} {len(body):>9}  {'yes' if same else 'NO'}")
        note = detail["note"]["body"]
        print(f"note: {len(note)} characters; names the run folder: {str(run) in note}")
        shots = {  # name -> (page, window height): Study Artifacts end the study page
            "note": (f"{base}/dashboard/studies/{sid}/note", 900),
            "study": (f"{base}/dashboard/studies/{sid}", 900),
            "study-full": (f"{base}/dashboard/studies/{sid}", 4200),
        }
        for name, (url, height) in shots.items():
            png = args.out.with_name(f"{args.out.stem}-{name}{args.out.suffix}")
            screenshot(browser, url, png, work / f"chromium-{name}", height)
            print(f"screenshot {png} ({png.stat().st_size} bytes, 1280x{height}) of {url}")
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
