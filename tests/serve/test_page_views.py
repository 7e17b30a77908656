"""The web page as a person sees it (issue 38 §5), in headless Chromium at a phone width and a
desktop width: screenshots of its main states (a question, the answer with citations and the
evidence table, the graph view, the review queue, an error), no sideways scrolling on a phone,
keyboard-only use, and an automated accessibility check (axe-core from npm, WCAG 2 A and AA).

Screenshots go to ``$MEDR2_SCREENSHOTS`` when it is set (``docs/screenshots`` holds the committed
ones: ``MEDR2_SCREENSHOTS=docs/screenshots make test``), else to a temporary folder."""

import json
import os
from pathlib import Path

import pytest
from test_browser import TOKEN, browser, server, wait_for  # noqa: F401  (fixtures)

WIDTHS = {"phone": (390, 844), "desktop": (1280, 900)}
AXE = Path(os.environ.get("MEDR2_AXE", Path(__file__).parents[2] / ".venv/node/node_modules/axe-core/axe.min.js"))
QUESTION = "Can metformin be used in a patient with type 2 diabetes and an eGFR of 35?"


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    out = Path(os.environ.get("MEDR2_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    out.mkdir(parents=True, exist_ok=True)
    return out


def snap(browser, folder: Path, name: str) -> Path:
    """A screenshot of the whole page (the window grown to the page's height)."""
    w = browser.get_window_size()["width"]
    h = browser.execute_script("return Math.max(document.body.scrollHeight, document.documentElement.scrollHeight)")
    browser.set_window_size(w, min(max(h + 120, 600), 4000))
    path = folder / f"{name}.png"
    browser.save_screenshot(str(path))
    return path


def no_sideways_scroll(browser) -> bool:
    return browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")


def axe_violations(browser) -> list[dict]:
    """Serious and critical WCAG 2 A/AA violations axe-core finds on the page as it is now."""
    if not AXE.exists():
        pytest.skip(f"axe-core is not installed at {AXE} (make install puts it there with npm)")
    if not browser.execute_script("return !!window.axe"):
        browser.execute_script(AXE.read_text(encoding="utf-8"))
    res = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa']}}).then(r => done(JSON.stringify(r.violations)))")
    return [{"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5]}
            for v in json.loads(res) if v["impact"] in ("serious", "critical")]


@pytest.mark.parametrize("width", list(WIDTHS))
def test_main_states_look_right_and_pass_an_accessibility_check(server, browser, shots, width):  # noqa: F811
    from selenium.webdriver.common.by import By

    size = WIDTHS[width]
    found: dict[str, list] = {}
    browser.set_window_size(*size)
    browser.get(server + "/")
    wait_for(lambda: "documents" in browser.find_element(By.ID, "health").text, what="health line")
    browser.find_element(By.ID, "question").send_keys(QUESTION)
    found["question"] = axe_violations(browser)
    snap(browser, shots, f"{width}-question")
    assert no_sideways_scroll(browser)

    browser.set_window_size(*size)
    browser.find_element(By.ID, "ask-btn").click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, ".card[data-pid]"), what="the evidence")
    assert browser.find_elements(By.CSS_SELECTOR, "#result a.cite")
    found["answer"] = axe_violations(browser)
    snap(browser, shots, f"{width}-answer-and-evidence")
    assert no_sideways_scroll(browser), "the answer or the evidence table makes a phone scroll sideways"

    browser.set_window_size(*size)
    browser.find_element(By.ID, "tab-graph").click()
    browser.find_element(By.ID, "entity").send_keys("metformin")
    browser.find_element(By.CSS_SELECTOR, "#graph button.primary").click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#graph-svg *"), what="the subgraph")
    found["graph"] = axe_violations(browser)
    snap(browser, shots, f"{width}-graph")

    browser.set_window_size(*size)
    browser.find_element(By.ID, "tab-review").click()
    browser.find_element(By.ID, "token").clear()
    browser.find_element(By.ID, "token").send_keys(TOKEN)
    browser.find_element(By.CSS_SELECTOR, "#review button.primary").click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#queue tr[data-tid]"), what="the review queue")
    found["review"] = axe_violations(browser)
    snap(browser, shots, f"{width}-review-queue")

    browser.set_window_size(*size)
    browser.get(server + "/")  # a fresh page: an empty question is refused with a warning
    browser.find_element(By.ID, "ask-btn").click()
    wait_for(lambda: browser.find_element(By.CSS_SELECTOR, "#ask-state .state").text, what="the warning")
    found["error"] = axe_violations(browser)
    snap(browser, shots, f"{width}-error")

    assert all((shots / f"{width}-{n}.png").stat().st_size > 5000 for n in
               ("question", "answer-and-evidence", "graph", "review-queue", "error"))
    assert not any(found.values()), f"accessibility violations: {found}"


def test_a_question_can_be_asked_with_the_keyboard_alone(server, browser):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.set_window_size(*WIDTHS["desktop"])
    browser.get(server + "/")
    wait_for(lambda: "documents" in browser.find_element(By.ID, "health").text, what="health line")
    body = browser.find_element(By.TAG_NAME, "body")
    active = lambda: browser.switch_to.active_element.get_attribute("id")  # noqa: E731
    for _ in range(12):  # Tab from the top of the page to the question box
        if active() == "question":
            break
        (browser.switch_to.active_element if active() else body).send_keys(Keys.TAB)
    assert active() == "question"
    browser.switch_to.active_element.send_keys(QUESTION)
    for _ in range(6):  # on to the Ask button
        browser.switch_to.active_element.send_keys(Keys.TAB)
        if active() == "ask-btn":
            break
    assert active() == "ask-btn"
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    assert wait_for(lambda: browser.find_element(By.ID, "answer-text").text.strip(), what="the answer")
