"""The report as a person sees it: `quietcore lab` writes one, and headless
Chromium (Debian's, driven by Playwright) opens it with no console errors,
every figure rendered with a size, and a screenshot kept as an artifact
(build/test-artifacts, or $QUIETCORE_ARTIFACTS)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

ARTIFACTS = Path(
    os.environ.get("QUIETCORE_ARTIFACTS", Path(__file__).resolve().parents[2] / "build" / "test-artifacts")
)


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no chromium: apt-get install chromium (.ci/run does)")
    return path


def in_chromium(index: Path, shot: str) -> tuple[str, list[str], list[str]]:
    """Open a report offline in headless Chromium: its text, the ids of its
    figures, and the errors met (console, page, any network request). Every
    figure must render with a size; a full-page screenshot is kept."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install '.[test]' brings playwright")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))

            # Offline: any request beyond the file itself would be a defect.
            def only_files(route: Any) -> None:
                if route.request.url.startswith("file:"):
                    route.continue_()
                else:
                    errors.append(f"network request: {route.request.url}")
                    route.abort()

            page.route("**/*", only_files)
            page.goto(index.as_uri())
            page.wait_for_load_state("load")
            body = page.inner_text("body")
            for svg in page.query_selector_all("figure svg"):
                box = svg.bounding_box()
                assert box is not None and box["width"] > 100 and box["height"] > 50, box
            names = [f.get_attribute("id") or "" for f in page.query_selector_all("figure")]
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            path = ARTIFACTS / shot
            page.screenshot(path=str(path), full_page=True)
            assert path.stat().st_size > 20_000
        finally:
            browser.close()
    return body, names, errors


@pytest.mark.slow
def test_lab_report_in_a_real_browser(lab_quick: tuple[Path, Path, Any]) -> None:
    out = lab_quick[1]  # the suite's one `lab --quick --report DIR`
    body, names, errors = in_chromium(out / "index.html", "lab-report.png")
    assert "The node" in body and "fingerprint" in body
    assert "OS noise" in body or "Per CPU" in body
    assert "Audit findings" in body
    assert len(names) >= 5
    assert any("noise-timeline" in n for n in names) and any("noise-attribution" in n for n in names)
    assert errors == []
