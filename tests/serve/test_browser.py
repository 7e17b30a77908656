"""End-to-end in headless Chromium (Debian chromium + chromedriver, driven by Selenium): ask a
demo question on the web page, open a citation, confirm a triple as a reviewer and see its tier
change. The server is uvicorn on loopback over a copy of the demo index."""

import re
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM.exists() and DRIVER.exists()),
                                reason="Debian chromium and chromium-driver are not installed (.ci/run installs them)")
TOKEN = "browser-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serving(app):
    """Serve ``app`` with uvicorn on a free loopback port for as long as the caller's fixture
    lives; yields the base URL."""
    import uvicorn

    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    t = threading.Thread(target=srv.run, daemon=True)
    t.start()
    for _ in range(100):
        if srv.started:
            break
        time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    t.join(10)


@pytest.fixture(scope="module")
def server(demo_index_dir, tmp_path_factory):
    import os

    from click.testing import CliRunner

    from medr2.cli import main
    from medr2.serve.app import create_app

    path = tmp_path_factory.mktemp("browser") / "index"
    shutil.copytree(demo_index_dir, path)
    assert CliRunner().invoke(main, ["kg", "build", "--index", str(path), "--no-progress"]).exit_code == 0
    os.environ["MEDR2_API_TOKEN"] = TOKEN
    try:
        app = create_app(path, generator="none", scorer="none")
    finally:
        del os.environ["MEDR2_API_TOKEN"]
    yield from serving(app)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    # the page-view tests (test_page_views.py) use this fixture without this module's skip mark
    if not (CHROMIUM.exists() and DRIVER.exists()):
        pytest.skip("Debian chromium and chromium-driver are not installed (.ci/run installs them)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,1000",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        opts.add_argument(flag)
    d = webdriver.Chrome(service=Service(str(DRIVER)), options=opts)
    d.set_page_load_timeout(30)
    yield d
    d.quit()


def wait_for(fn, timeout=60.0, what="condition"):
    end = time.time() + timeout
    last = None
    while time.time() < end:
        try:
            got = fn()
            if got:
                return got
        except Exception as e:  # element not there yet
            last = e
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} ({last})")


def test_ask_and_open_a_citation(server, browser):
    from selenium.webdriver.common.by import By

    browser.get(server + "/")
    wait_for(lambda: "documents" in browser.find_element(By.ID, "health").text, what="health line")
    browser.find_element(By.ID, "question").send_keys("Can metformin be used in a patient with type 2 diabetes "
                                                      "and an eGFR of 35?")
    browser.find_element(By.ID, "ask-btn").click()
    answer = wait_for(lambda: browser.find_element(By.ID, "answer-text"), what="the answer")
    assert answer.text.strip()
    # a guideline question without a generator: the applicable recommendations, with grade badges
    recs = browser.find_elements(By.CSS_SELECTOR, "#recommendations li")
    assert recs and "recommendation" in answer.text
    badge = recs[0].find_element(By.CSS_SELECTOR, "span.badge[class*='grade-']")
    assert badge.text.strip() and "metformin" in recs[0].text.lower()
    cards = browser.find_elements(By.CSS_SELECTOR, ".card[data-pid]")
    assert cards, "evidence cards are shown"
    links = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#result a.cite[onclick^='openCite']"),
                     what="a citation link")
    pid = links[0].get_attribute("onclick").split("'")[1]
    links[0].click()
    card = browser.find_element(By.CSS_SELECTOR, f".card[data-pid='{pid}']")
    wait_for(lambda: "flash" in card.get_attribute("class"), 5, "the cited card to be highlighted")
    assert pid in card.text


def test_reviewer_confirms_a_triple_and_sees_its_tier_change(server, browser):
    from selenium.webdriver.common.by import By

    browser.get(server + "/")
    browser.find_element(By.ID, "tab-review").click()
    browser.find_element(By.ID, "token").send_keys(TOKEN)
    browser.find_element(By.ID, "reviewer").send_keys("dr-browser")
    browser.find_element(By.CSS_SELECTOR, "#review button.primary").click()
    rows = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#queue tr[data-tid]"), what="the review queue")
    row = rows[0]
    tid = row.get_attribute("data-tid")
    before = row.find_element(By.CSS_SELECTOR, ".tier").text
    row.find_element(By.CSS_SELECTOR, "button.confirm").click()
    msg = wait_for(lambda: "Confirmed" in browser.find_element(By.ID, "review-state").text
                   and browser.find_element(By.ID, "review-state").text, what="the confirmation")
    after = browser.find_element(By.CSS_SELECTOR, f"tr[data-tid='{tid}'] .tier").text
    assert before == "exploratory" and after != before and f"{before} → {after}" in msg


def test_wrong_token_is_shown_as_an_error(server, browser):
    from selenium.webdriver.common.by import By

    browser.get(server + "/")
    browser.find_element(By.ID, "tab-review").click()
    browser.find_element(By.ID, "token").send_keys("wrong")
    browser.find_element(By.CSS_SELECTOR, "#review button.primary").click()
    rows = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#queue tr[data-tid]"), what="the queue")
    rows[0].find_element(By.CSS_SELECTOR, "button.reject").click()
    err = wait_for(lambda: browser.find_element(By.CSS_SELECTOR, "#review-state .state.error").text, what="an error")
    assert "401" in err


@pytest.fixture(scope="module")
def tcm_server(tmp_path_factory):
    from helpers import run_cli
    from tcm_fixture import write_world

    from medr2.serve.app import create_app

    root = tmp_path_factory.mktemp("tcm-browser")
    w = write_world(root / "data")
    idx = root / "idx"
    run_cli("ingest", w["gbt"], w["cvr"], "--index", idx)
    run_cli("kg", "cases", w["cvr"], "--index", idx)
    app = create_app(idx, generator="none", scorer="none")
    yield from serving(app)


def test_tcm_mode_shows_the_matched_case_paths(tcm_server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(tcm_server + "/")
    wait_for(lambda: "documents" in browser.find_element(By.ID, "health").text, what="health line")
    browser.find_element(By.ID, "question").send_keys("患者，男，38岁。头痛，目赤，口苦，耳鸣，舌质红，苔黄，脉弦数。其证型为（  ）。")
    browser.find_element(By.ID, "options").send_keys("A. 肝火上炎证\nB. 肝阳上亢证\nC. 脾气虚证")
    Select(browser.find_element(By.ID, "mode")).select_by_value("tcm")
    browser.find_element(By.ID, "ask-btn").click()
    table = wait_for(lambda: browser.find_element(By.ID, "case-paths"), what="the case paths")
    rows = table.find_elements(By.CSS_SELECTOR, "tr")[1:]
    assert "tcmbench:CVR-1" in rows[0].text and "辨证 肝火上炎证 → 治法 清肝泻火 → 方剂 龙胆泻肝汤" in rows[0].text
    assert "头痛面赤" in rows[0].text  # the case's reasoning
    text = browser.find_element(By.ID, "result").text
    # the definition's citation number follows the retrieved passages (kg.cases.passages_k)
    assert "findings of this case: 头痛、目赤" in text and re.search(r"option A 肝火上炎证 \[\d+\]", text)
    assert browser.find_element(By.ID, "answer-text").text.strip().startswith("A")
