"""The report's layout and per-probe views in headless Chromium (as tests/test_report_browser.py), measured by script:

- at 1280 and 1920 px the label table fits its panel (no sideways scroll, every column's right edge inside the
  panel), labels below --min-count included or not; the layer × head grid spans its panel's width; no two texts of
  a sentence's arc view (the arcs' labels, the words) overlap, in any kept sentence of dep, trees and frames;
- labels below --min-count are left out of the table and of a head's details until the check box asks for
  them, then shown greyed with their count;
- each probe's per-sentence view is its own: dep and trees gold arcs (one per word), pos the units with gold
  and predicted labels (no arcs), frames target → frame element arcs, each drawn item coloured as the result's
  marks say; seg its example sentences as the head segments them (as `probes show` prints them).

Screenshots go to $PROBES_ARTEFACTS (else the test's temporary folder).
"""
from __future__ import annotations

import pytest

from probes.builtin.seg.show import segmentations
from probes.cli import main
from probes.base.packing import unpack_marks
from probes.results.probe_result import load_result
from probes.base.wording import counted
from probe_corpora import FRAMENET_DOCUMENTS, excerpt
from test_report_browser import artefacts, browser, not_blank  # noqa: F401  (browser: the fixture)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def folder(tmp_path_factory, minilm, shared_corpora):
    out = tmp_path_factory.mktemp("layout") / "minilm"
    assert main(["run", "dep", "pos", "trees", "--limit", "40", "--examples", "4", "--plots", "none", "--quiet",
                 "--out", str(out)]) == 0
    documents = out.parent / "documents.txt"
    documents.write_text("\n".join(FRAMENET_DOCUMENTS) + "\n")
    assert main(["run", "frames", "--corpus", str(shared_corpora / "framenet-1.7"), "--documents", str(documents),
                 "--min-count", "2", "--examples", "4", "--plots", "none", "--quiet", "--out", str(out)]) == 0
    gsd = excerpt(shared_corpora / "ud-chinese-gsdsimp" / "zh_gsdsimp-ud-test.conllu", 8, out.parent / "gsd.conllu")
    assert main(["run", "seg", "--corpus", str(gsd), "--tokenize", "text", "--examples", "4", "--seg-examples", "4",
                 "--plots", "none", "--quiet", "--out", str(out)]) == 0
    assert main(["report", str(out), "-o", str(out.parent / "report.html")]) == 0
    return out


FITS = """const panel = document.getElementById("labels-panel"), box = panel.getBoundingClientRect();
return {scroll: panel.scrollWidth, client: panel.clientWidth, right: box.right,
        columns: [...document.querySelectorAll("#labels th, #labels td")].map(e => e.getBoundingClientRect().right),
        shown: [...document.querySelectorAll("#labels th")].map(e => e.getBoundingClientRect().width)};"""


def _fits(browser) -> None:
    m = browser.execute_script(FITS)
    assert m["scroll"] <= m["client"], m  # no horizontal scroll
    assert max(m["columns"]) <= m["right"] + 0.5, m
    assert len(m["shown"]) == 6 and min(m["shown"]) > 0  # label, count, best head, score, baseline, margin


@pytest.mark.parametrize("width", [1280, 1920])
def test_label_table_fits_and_rare_labels_are_marked(folder, browser, width, tmp_path):
    from selenium.webdriver.common.by import By

    out = artefacts(tmp_path)
    browser.set_window_size(width, 1200)
    browser.get((folder.parent / "report.html").as_uri())
    for probe in ("dep", "pos", "trees", "frames"):
        result = load_result(folder / f"{probe}.json")
        rare = {name for name in result.labels if result.below_min_count(name)}
        browser.find_element(By.CSS_SELECTOR, f'#probes button[data-probe="{probe}"]').click()
        shown = [tr.get_attribute("data-label") for tr in browser.find_elements(By.CSS_SELECTOR, "#labels tbody tr")]
        assert set(shown) == {"overall", *result.labels} - rare  # rare labels left out unless asked
        _fits(browser)
        if not rare:
            assert not browser.find_element(By.ID, "rare-box").is_displayed()
            continue
        box = browser.find_element(By.ID, "rare-box")
        assert f"{counted(len(rare), 'label')} below --min-count {result.min_count}" in box.text
        browser.find_element(By.ID, "rare").click()
        rows = browser.find_elements(By.CSS_SELECTOR, "#labels tbody tr.rare")
        assert {tr.get_attribute("data-label") for tr in rows} == rare
        for tr in rows:  # greyed, with their count
            assert tr.value_of_css_property("color") == "rgba(158, 158, 158, 1)"
            assert int(tr.find_elements(By.TAG_NAME, "td")[1].text) == result.labels[tr.get_attribute("data-label")].count
        _fits(browser)
        png = browser.find_element(By.ID, "labels-panel").screenshot_as_png
        (out / f"report-labels-{probe}-{width}.png").write_bytes(png)
        not_blank(png)
        # a head's details list rare labels only while asked, greyed
        browser.find_element(By.CSS_SELECTOR, '#grids td.cell[data-layer="1"][data-head="4"]').click()
        detail = {tr.find_element(By.TAG_NAME, "td").text for tr in browser.find_elements(By.CSS_SELECTOR, "#details tr.rare")}
        assert detail and detail <= rare
        browser.find_element(By.ID, "rare").click()  # off again
        assert not browser.find_elements(By.CSS_SELECTOR, "#details tr.rare, #labels tr.rare")
    (out / f"report-{width}.png").write_bytes(browser.get_screenshot_as_png())
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def _head_row(browser, result) -> int:
    """The row (layer * H + head) of the head the per-sentence view shows."""
    from selenium.webdriver.common.by import By

    layer, head = (int(x) for x in browser.find_element(By.ID, "view-head").text[1:].split("-H"))
    return layer * result.info.heads + head


def test_each_probe_draws_its_own_view(folder, browser, tmp_path):
    from selenium.webdriver.common.by import By

    out = artefacts(tmp_path)
    browser.set_window_size(1400, 1300)
    browser.get((folder.parent / "report.html").as_uri())
    for probe in ("dep", "trees", "pos", "frames"):
        result = load_result(folder / f"{probe}.json")
        browser.find_element(By.CSS_SELECTOR, f'#probes button[data-probe="{probe}"]').click()
        sentence = result.extra["sentence_views"]["sentences"][0]
        marks = unpack_marks(sentence, result.info.layers, result.info.heads)
        right = marks["right"][_head_row(browser, result)].astype(bool)
        title = browser.find_element(By.ID, "view-title").text
        if probe == "pos":
            assert title.startswith("each unit: gold label over the label the head predicts")
            drawn = browser.find_elements(By.CSS_SELECTOR, "#arcs path.unit")
            assert not browser.find_elements(By.CSS_SELECTOR, "#arcs path.arc")  # no dependency arcs for pos
        else:
            assert title.startswith({"dep": "gold arcs", "trees": "gold arcs", "frames": "target → frame element"}[probe])
            drawn = browser.find_elements(By.CSS_SELECTOR, "#arcs path.arc")
        assert len(drawn) == len(sentence["items"]) == len(right) > 0
        assert [("right" in p.get_attribute("class").split()) for p in drawn] == right.tolist()
        png = browser.find_element(By.ID, "sentence-panel").screenshot_as_png
        (out / f"report-view-{probe}.png").write_bytes(png)
        not_blank(png)
    result = load_result(folder / "seg.json")
    browser.find_element(By.CSS_SELECTOR, '#probes button[data-probe="seg"]').click()
    assert browser.find_element(By.ID, "view-title").text.startswith("segmentation")
    assert not browser.find_elements(By.CSS_SELECTOR, "#arcs svg")
    layer, head = (int(x) for x in browser.find_element(By.ID, "view-head").text[1:].split("-H"))
    shown = [p.find_element(By.CSS_SELECTOR, ".head").text for p in browser.find_elements(By.CSS_SELECTOR, ".segments p")]
    assert shown == [" ".join(s["predicted"]) for s in segmentations(result, [(layer, head)])] and shown
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


TEXT_BOXES = """return [...document.querySelectorAll("#arcs svg text")].map(t => {
    const b = t.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom, t.textContent]; });"""


@pytest.mark.parametrize("width", [1280, 1920])
def test_grid_spans_its_panel(folder, browser, width):
    from selenium.webdriver.common.by import By

    browser.set_window_size(width, 1200)
    browser.get((folder.parent / "report.html").as_uri())
    grid = browser.find_element(By.CSS_SELECTOR, "#grids table.grid").rect["width"]
    panel = browser.execute_script("return document.getElementById('grids').clientWidth;")
    assert grid >= 0.95 * panel, (grid, panel)  # one model: its grid as wide as the panel (not ~190 px of 620)
    rows = browser.find_elements(By.CSS_SELECTOR, "#grids table.grid tr")
    assert all(r.rect["height"] >= 16 for r in rows[1:])  # cells no flatter than before


@pytest.mark.parametrize("width", [1280, 1920])
def test_arc_labels_do_not_overlap(folder, browser, width):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.set_window_size(width, 1200)
    browser.get((folder.parent / "report.html").as_uri())
    checked = 0
    for probe in ("dep", "trees", "frames"):
        browser.find_element(By.CSS_SELECTOR, f'#probes button[data-probe="{probe}"]').click()
        picker = Select(browser.find_element(By.ID, "sentence"))
        for index in range(len(picker.options)):
            picker.select_by_index(index)
            boxes = browser.execute_script(TEXT_BOXES)
            for i, a in enumerate(boxes):
                for b in boxes[i + 1:]:
                    assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (probe, index, a, b)
            checked += len(boxes)
    assert checked > 200
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
