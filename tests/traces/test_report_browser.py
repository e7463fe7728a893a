"""The HTML report in real headless Chromium: what the page shows, and that no script from trace content runs.

Needs the Debian packages ``chromium`` and ``chromium-driver`` (a README prerequisite; .ci/run installs
them). Without them these tests are skipped with a reason saying how to install them, and fail instead under
``TRAJKIT_REQUIRE_FIXTURES=1`` (CI sets it), like the tests of the shared real-data fixtures.
"""
import json
import re
import shutil

import pytest

from trajkit.traces.report import write_report

from ..conftest import skip_or_fail
from .test_report import EVIL, EXPECTED, P1, P2, P3, P4, write_corpus

pytestmark = pytest.mark.browser

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
         "--window-size=1400,1000")


def missing_browser() -> str | None:
    """Why the browser cannot run (what to install), or None when it can."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    if not missing:
        return None
    return (f"{' and '.join(missing)} not found: the headless-browser check of the HTML report needs the Debian "
            "packages `chromium` and `chromium-driver` (apt-get install chromium chromium-driver)")


@pytest.fixture(scope="module")
def _session(tmp_path_factory):
    """A report on the hand-made corpus, open in headless Chromium: (driver, stats, folder); None without
    a browser (each test then skips, or fails under TRAJKIT_REQUIRE_FIXTURES=1, through ``page``)."""
    if missing_browser() is not None:
        yield None
        return
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    folder = tmp_path_factory.mktemp("browser")
    path = write_report(write_corpus(folder), folder / "out")
    stats = json.loads((folder / "out" / "stats.json").read_text())
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + (f"--user-data-dir={folder / 'profile'}",):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.get(path.as_uri())
        yield driver, stats, folder
    finally:
        driver.quit()


@pytest.fixture
def page(request, _session):
    """The open report (see ``_session``) for one test."""
    if _session is None:
        skip_or_fail(request, missing_browser())
    return _session


def _by(driver, css):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, css)


# The page renders a trace's body, and a system prompt, from a <template> in its `toggle` event handler, which
# runs after the click (or `open = true`) has returned; search applies after a debounce. So every element that
# appears after an interaction is waited for (explicit waits), never looked up at once.
def _wait(scope, timeout=10):
    """An explicit wait on a driver, or on an element (its conditions then search inside that element)."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(scope, timeout, poll_frequency=0.05)


def _shown(scope, css):
    """The first element under ``scope`` matching ``css``, once it is displayed."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    return _wait(scope).until(EC.visibility_of_element_located((By.CSS_SELECTOR, css)), f"no visible {css!r}")


def _text_shown(driver, css, text):
    """Wait until the element matching ``css`` shows ``text``."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    _wait(driver).until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, css), text), f"{css!r} never showed {text!r}")
    assert _by(driver, css)[0].text == text


_ALL_FILLED = ("return Array.from(document.querySelectorAll(arguments[0]))"
               ".every(function (el) { return el.hasChildNodes(); })")


def _all_filled(driver, css):
    """Wait until every element matching ``css`` has content (lazy bodies cloned from their templates)."""
    _wait(driver).until(lambda d: d.execute_script(_ALL_FILLED, css), f"some {css!r} stayed empty")


def _open(driver, trace_id):
    """Click a closed trace's summary line (as a user would); return the trace element once its body is rendered."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    item = next(d for d in _by(driver, "details.trace") if d.get_attribute("data-q").startswith(trace_id))
    if item.get_attribute("open") is None:
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", item)
        item.find_element("css selector", "summary").click()
    _wait(item).until(EC.presence_of_element_located((By.CSS_SELECTOR, ".t-body > *")), f"{trace_id} not rendered")
    assert item.get_attribute("open") is not None
    return item


def _search(driver, query):
    """Type a query; return the traces still listed once the page has applied it."""
    box = _by(driver, "#trace-search")[0]
    box.clear()
    box.send_keys(query + " ")
    _wait(driver).until(lambda d: _by(d, "#trace-list")[0].get_attribute("data-applied") == query + " ",
                        f"search {query!r} never applied")
    return _listed(driver)


def _listed(driver):
    """Ids of the traces the list shows (rendered with a box, i.e. not filtered out)."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('details.trace'))"
        ".filter(function (d) { return d.getClientRects().length > 0; })"
        ".map(function (d) { return d.querySelector('.t-id').textContent; })")


def _no_payload_ran(driver):
    from selenium.common.exceptions import NoAlertPresentException

    assert driver.execute_script("return typeof window.__pwned") == "undefined"
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text
    csp = [e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]
    assert not csp, f"something tried to run and was blocked by the CSP: {csp}"


def test_title_and_summary_numbers(page):
    driver, stats, _ = page
    assert driver.title == "trajkit trace report: alpha, beta"
    assert _by(driver, "h1")[0].text == "Trace report: alpha, beta"
    rows = {r.get_attribute("data-key"): [c.text for c in r.find_elements("css selector", "td")]
            for r in _by(driver, "#t-counts tbody tr")}
    for key, want in EXPECTED.items():
        assert rows[key][0] == f"{want:,}", key
    for key in ("tool_calls", "failed_tool_responses", "think_words", "assistant_turns"):
        by = stats["by"]["source"]
        assert rows[key] == [f"{stats[key]:,}", f"{by['alpha'][key]:,}", f"{by['beta'][key]:,}"]
    card = _by(driver, '.card[data-key="failed responses"] .c-value')[0].text
    assert card == "41.7%"  # 5 of 12
    assert len(_by(driver, "#charts img")) == 7 and all(
        driver.execute_script("return arguments[0].naturalWidth", img) >= 800 for img in _by(driver, "#charts img"))


def test_traces_listed_and_think_text_shown(page):
    driver, _, _ = page
    items = _by(driver, "details.trace")
    assert len(items) == 5 and _by(driver, "#trace-shown")[0].text == "5 of 5 traces"
    assert [i.find_element("css selector", ".t-id").text for i in items] == [
        "evil-1", "fail-1", "quirky-1", "glm-1", "glm-2"]
    item = _open(driver, "fail-1")
    assert _shown(item, ".think-text").text == "check the disk quota first"


def test_failed_response_is_highlighted(page):
    driver, _, _ = page
    item = _open(driver, "fail-1")
    failed = _shown(item, ".resp.failed")
    assert "permission denied" in failed.text
    assert failed.find_element("css selector", ".badge.bad").text == "failed"
    r, g, b = map(int, re.findall(r"\d+", failed.value_of_css_property("background-color"))[:3])
    assert r > g + 10 and r > b + 10  # a red tint
    assert failed.value_of_css_property("border-left-width") == "4px"
    ok = _shown(_open(driver, "glm-2"), ".resp")
    assert "failed" not in ok.get_attribute("class") and ok.find_element("css selector", ".badge.good").text == "ok"
    assert "exit 1" in ok.text  # a non-zero exit is shown, not marked failed


def test_search_filters_the_list(page):
    driver, _, _ = page
    everything = ["evil-1", "fail-1", "quirky-1", "glm-1", "glm-2"]
    for query, expected in (("web_search", ["glm-1"]), ("PERMISSION denied", ["fail-1"]),
                            ("terminal", ["evil-1", "quirky-1", "glm-2"]), ("pwned", ["evil-1"]),
                            ("no such text", []), ("", everything)):
        assert _search(driver, query) == expected, query
        assert _by(driver, "#trace-shown")[0].text == f"{len(expected)} of 5 traces"
        assert _by(driver, "#no-match")[0].is_displayed() == (not expected)
    _by(driver, "#only-failed")[0].click()  # its change event applies the filter
    _text_shown(driver, "#trace-shown", "3 of 5 traces")
    assert _listed(driver) == ["fail-1", "quirky-1", "glm-1"]
    _by(driver, "#only-failed")[0].click()
    _text_shown(driver, "#trace-shown", "5 of 5 traces")
    assert _listed(driver) == everything


def test_no_script_from_trace_content_runs(page):
    driver, _, folder = page
    _no_payload_ran(driver)
    item = _open(driver, "evil-1")
    item.find_element("css selector", "details.sys > summary").click()  # the shared system prompt, too
    assert "<tools>" in _shown(item, ".sys-text").text
    for el in _by(driver, "details"):  # open everything the page holds
        driver.execute_script("arguments[0].open = true", el)
    _all_filled(driver, "details.trace > .t-body")
    _all_filled(driver, "details.sys[open] > .sys-body")
    assert _listed(driver) == ["evil-1", "fail-1", "quirky-1", "glm-1", "glm-2"]
    assert item.find_element("css selector", ".t-task").text == "Inspect the page " + EVIL + " {{js}}"
    assert _shown(item, ".think-text").text == "The page says " + EVIL
    output = _shown(item, ".resp dl.kv dd").text
    assert all(p in output for p in (P1, P2, P3, P4))
    assert P2 in _shown(item, ".m-user").text
    assert P4 in _shown(item, ".call").text
    _no_payload_ran(driver)
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'}); window.scrollBy(0, -70)", item)
    shot = folder / "report.png"
    assert driver.save_screenshot(str(shot)) and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bundled_sample_runs_no_payload(page):
    """The bundled synthetic sample carries raw-HTML browsing results (alert, onerror, </textarea>); open
    every trace of its report in a new tab and check nothing ran."""

    driver, _, folder = page
    from trajkit.synth import sample_paths

    path = write_report([str(p) for p in sample_paths()], folder / "sample", max_traces=60)
    traces = json.loads((folder / "sample" / "stats.json").read_text())["traces"]
    main_tab = driver.current_window_handle
    driver.switch_to.new_window("tab")
    try:
        driver.get(path.as_uri())
        assert len(_listed(driver)) == min(60, traces)
        open_all = "document.querySelectorAll('details').forEach(function (d) { d.open = true; })"
        driver.execute_script(open_all)
        _all_filled(driver, "details.trace > .t-body")
        driver.execute_script(open_all)  # the system prompts and think blocks cloned by the first pass
        _all_filled(driver, "#trace-list details.sys > .sys-body")
        assert driver.execute_script("return document.querySelectorAll('#trace-list .msg').length") > 60
        assert driver.execute_script("return document.querySelectorAll('#trace-list .sys-text').length") > 0
        _no_payload_ran(driver)
    finally:
        driver.close()
        driver.switch_to.window(main_tab)
