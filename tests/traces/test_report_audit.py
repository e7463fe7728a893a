"""The report's audit section (``trajkit traces report … --audit AUDIT.json``): the verdict table of a real
``trajkit audit data --json`` run on a planted leak (an eval row copied from train, its id a script
payload), in the page's HTML and in real headless Chromium (same setup and skip rule as
test_report_browser.py): the section heads the page, every check is a row with its verdict coloured, the
items open on click and show the payload as text, and nothing runs."""
from __future__ import annotations

import json
import re

import pytest

from trajkit.cli.main import main
from trajkit.errors import InputError
from trajkit.traces.report import write_report
from trajkit.traces.report_audit import read_audit

from ..conftest import skip_or_fail
from .test_report import EVIL, PAYLOADS, PageParser, write_corpus
from .test_report_browser import CHROMEDRIVER, CHROMIUM, FLAGS, missing_browser

QUESTIONS = ["what is the capital city of france and why is it famous",
             "how many legs does a spider have and what do they use them for",
             "name the largest ocean on the planet and one animal living there"]


def _audit_json(folder, capsys) -> str:
    """``trajkit audit data --json`` on train rows and an eval set holding one copied train row."""
    train = folder / "train.jsonl"
    train.write_text("".join(json.dumps({"id": f"t{i}", "question": q, "answer": "x"}) + "\n"
                             for i, q in enumerate(QUESTIONS)))
    evals = folder / "eval.jsonl"
    evals.write_text(json.dumps({"id": EVIL, "question": QUESTIONS[1], "answer": "x"}) + "\n"
                     + json.dumps({"id": "e-clean", "question": "which planet is known as the red planet", "answer": "mars"})
                     + "\n")
    assert main(["audit", "data", "--train", str(train), "--eval", str(evals), "--json"]) == 1
    out = folder / "audit.json"
    out.write_text(capsys.readouterr().out)
    return str(out)


@pytest.fixture
def audited(tmp_path, capsys):
    audit = _audit_json(tmp_path, capsys)
    path = write_report(write_corpus(tmp_path), tmp_path / "out", audit=[audit])
    return path, audit, json.loads(open(audit).read())


def test_the_audit_table_holds_every_check_escaped(audited):
    path, audit, data = audited
    page = path.read_text(encoding="utf-8")
    parser = PageParser()
    parser.feed(page)
    rows = parser.tables[None]  # the audit table has a class, not an id
    got = [(key, cells[:2]) for key, cells in rows if key]
    assert got == [(c["id"], [c["id"], c["verdict"]]) for c in data["checks"]]
    assert [c["verdict"] for c in data["checks"]][0] == "FAIL"  # leak.exact: the copied row
    assert page.index('id="audit"') < page.index('id="summary"') and '<a href="#audit">Audit</a>' in page
    for p in PAYLOADS:  # the item naming the copied row quotes its id: escaped like trace text
        assert p not in page
    assert re.search(r"<li>&lt;script&gt;window.__pwned=1&lt;/script&gt;.* = t1 \(prompt\+answer\)</li>", page)


def test_no_audit_no_section_and_bad_files_are_named(tmp_path):
    page = write_report(write_corpus(tmp_path), tmp_path / "out").read_text(encoding="utf-8")
    assert 'id="audit"' not in page and "#audit" not in page
    bad = tmp_path / "bad.json"
    for text, message in (("{", "not JSON"), ('{"verdict": "PASS"}', "field checks: no checks list"),
                          ('{"checks": [{"id": "a", "verdict": "OK"}]}', "field checks[0]: check 0 needs an id")):
        bad.write_text(text)
        with pytest.raises(InputError, match=re.escape(message)):
            read_audit(str(bad))
    bad.write_text("[1, 2]")
    with pytest.raises(InputError, match="no checks list"):  # read first: nothing is written
        write_report(write_corpus(tmp_path), tmp_path / "out2", audit=[str(bad)])
    assert not (tmp_path / "out2").exists()


def test_cli_report_with_audit(tmp_path, capsys):
    audit = _audit_json(tmp_path, capsys)
    specs = write_corpus(tmp_path)
    assert main(["traces", "report", *specs, "--out", str(tmp_path / "out"), "-q", "--audit", audit]) == 0
    assert 'class="t-audit"' in (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    capsys.readouterr()
    assert main(["traces", "report", *specs, "--out", str(tmp_path / "o2"), "-q", "--audit", str(tmp_path)]) == 2
    assert "cannot read the audit file" in capsys.readouterr().err and not (tmp_path / "o2").exists()


@pytest.mark.browser
def test_the_audit_section_in_chromium(request, audited, tmp_path):
    why = missing_browser()
    if why is not None:
        skip_or_fail(request, why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    path, audit, data = audited
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + (f"--user-data-dir={tmp_path / 'profile'}",):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.get(path.as_uri())
        section = driver.find_element(By.CSS_SELECTOR, "main > section")
        assert section.get_attribute("id") == "audit" and section.is_displayed()  # first on the page
        assert driver.find_element(By.CSS_SELECTOR, ".audit .a-file").text == audit
        rows = driver.find_elements(By.CSS_SELECTOR, ".t-audit tbody tr")
        assert [(r.find_element(By.CSS_SELECTOR, "th").text, r.find_element(By.CSS_SELECTOR, ".verdict").text)
                for r in rows] == [(c["id"], c["verdict"]) for c in data["checks"]]
        fail = rows[0].find_element(By.CSS_SELECTOR, ".verdict")
        r, g, b = map(int, re.findall(r"\d+", fail.value_of_css_property("color"))[:3])
        assert r > g + 60 and r > b + 60  # red text
        items = rows[0].find_element(By.CSS_SELECTOR, "details.a-items")
        assert items.get_attribute("open") is None and not items.find_element(By.CSS_SELECTOR, "li").is_displayed()
        items.find_element(By.CSS_SELECTOR, "summary").click()
        li = WebDriverWait(items, 10).until(EC.visibility_of_element_located((By.CSS_SELECTOR, "li")))
        assert li.text == data["checks"][0]["items"][0] and li.text.startswith(EVIL)  # shown as text
        assert driver.execute_script("return typeof window.__pwned") == "undefined"
        csp = [e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]
        assert not csp, f"something tried to run and was blocked by the CSP: {csp}"
    finally:
        driver.quit()
