"""A learner's session in a real browser: open lab01 from the work folder, run everything,
see the self-check fail the untouched stub; solve it, run everything again, and see figures,
a live temperature slider that redraws its plot, and a passing self-check."""
from __future__ import annotations

import time

import nbformat
import pytest
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from conftest import ROOT, SHOTS

LAB = "lab01"
SELF_CHECK = f'"""Self-check."""\nimport autograder.kernel\n\nautograder.kernel.self_check("{LAB}", globals())'


def wait_for(driver, what, timeout=120.0, every=0.5, message="condition"):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            last = what(driver)
            if last:
                return last
        except (StaleElementReferenceException, WebDriverException):
            pass
        time.sleep(every)
    shot(driver, f"timeout_{message.replace(' ', '_')[:40]}")
    pytest.fail(f"timed out after {timeout:g} s waiting for {message}")


def shot(driver, name):
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def with_self_check_cell(path):
    """The notebook with a self-check cell at the end, unless the lab already has one."""
    nb = nbformat.read(str(path), as_version=4)
    if not any("self_check(" in c.source for c in nb.cells if c.cell_type == "code"):
        nb.cells.append(nbformat.v4.new_code_cell(SELF_CHECK))
        nbformat.write(nb, str(path))


def solve(path):
    """What a learner who finished the lab has: each solution cell holds the solution."""
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source
               for c in nbformat.read(str(ROOT / "solutions" / LAB / f"{LAB}.ipynb"), as_version=4).cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    nb = nbformat.read(str(path), as_version=4)
    for c in nb.cells:
        gid = c.metadata.get("nbgrader", {}).get("grade_id")
        if c.metadata.get("nbgrader", {}).get("solution") and gid in answers:
            c.source = answers[gid]
    nbformat.write(nb, str(path))


def open_notebook(driver, lab_server, rel):
    driver.get(lab_server.url(rel))
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell"), 180,
             message="the notebook to open")
    wait_for(driver, kernel_idle, 180, message="the kernel to start")
    time.sleep(1)
    for button in driver.find_elements(By.CSS_SELECTOR, ".jp-toast-button, .Toastify button"):
        if button.text.strip() == "No":          # the "official Jupyter news?" question
            button.click()


def kernel_idle(driver) -> bool:
    ind = driver.find_elements(By.CSS_SELECTOR, ".jp-Notebook-ExecutionIndicator")
    if ind and ind[0].get_attribute("data-status") not in (None, "idle"):
        return False
    busy = [p for p in driver.find_elements(By.CSS_SELECTOR, ".jp-InputPrompt") if "[*]" in p.text]
    return not busy


def command(driver, menu, label):
    """Click menu > the item labelled `label`, as a learner does."""
    for item in driver.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item"):
        if item.text.strip() == menu:
            item.click()
            break
    else:
        pytest.fail(f"no {menu!r} menu")

    def item(d):
        for li in d.find_elements(By.CSS_SELECTOR, ".lm-Menu-item"):
            if li.text.split("\n")[0].strip() == label:
                return li
        return None
    wait_for(driver, item, 10, message=f"menu item {label}").click()


def run_all(driver, timeout=400):
    command(driver, "Run", "Run All Cells")
    time.sleep(2)
    wait_for(driver, kernel_idle, timeout, every=1, message="Run All to finish")


def cell_with(driver, text):
    for cell in driver.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-CodeCell"):
        if text in cell.find_element(By.CSS_SELECTOR, ".jp-InputArea-editor").text:
            return cell
    pytest.fail(f"no code cell containing {text!r}")


def run_cell(driver, cell, timeout=180):
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", cell)
    cell.find_element(By.CSS_SELECTOR, ".jp-InputArea-editor").click()
    ActionChains(driver).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
    time.sleep(1)
    wait_for(driver, kernel_idle, timeout, message="the cell to run")


def output_text(cell) -> str:
    return "\n".join(o.text for o in cell.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output"))


def stub_self_check(browser, lab_server, rel: str, done: str, name: str) -> str:
    """Open the untouched stub at work/`rel`, Run All, run its self-check cell; the report's
    text once it shows `done` (a screenshot `name` is kept)."""
    path = lab_server.work / rel
    assert path.is_file(), f"the lab server did not copy {rel} into the work folder"
    with_self_check_cell(path)
    open_notebook(browser, lab_server, rel)
    run_all(browser)                      # stops at the first cell that calls an unwritten exercise
    errors = browser.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    assert errors, "Run All on the stub should stop at a NotImplementedError"
    cell = cell_with(browser, "self_check(")
    run_cell(browser, cell)
    text = wait_for(browser, lambda d: done in output_text(cell) and output_text(cell), 60,
                    message=f"the self-check report of {rel}")
    shot(browser, name)
    return text


def test_stub_self_check_fails_in_the_browser(lab_server, browser):
    text = stub_self_check(browser, lab_server, f"{LAB}/{LAB}.ipynb", "visible checks passed", "lab01_stub_self_check")
    assert "still failing" in text and "FAIL" in text and "not implemented yet" in text, text[-1500:]
    assert "[1/" in text, "the self-check shows its progress test by test"


def test_solved_lab_draws_figures_and_a_live_slider(lab_server, browser):
    path = lab_server.work / LAB / f"{LAB}.ipynb"
    with_self_check_cell(path)
    solve(path)
    open_notebook(browser, lab_server, f"{LAB}/{LAB}.ipynb")
    run_all(browser)
    shot(browser, "lab01_solved_after_run_all")
    errors = browser.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    assert not [e.text for e in errors if "Error" in e.text], [e.text[:300] for e in errors]
    figures = browser.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output img")
    assert len(figures) >= 3, f"only {len(figures)} figures rendered"

    slider = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".widget-slider, .widget-hslider"), 60,
                      message="the temperature slider")
    box = slider.find_element(By.XPATH, "./ancestor::div[contains(@class, 'widget-interact') or "
                                        "contains(@class, 'jupyter-widgets')][last()]")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", slider)
    readout = slider.find_element(By.CSS_SELECTOR, ".widget-readout")
    image = wait_for(browser, lambda d: box.find_element(By.CSS_SELECTOR, "img"), 60, message="the slider's plot")
    before_src, before_value = image.get_attribute("src"), readout.text.strip()
    browser.execute_script("arguments[0].scrollIntoView({block: 'end'});", image)
    shot(browser, "lab01_slider_before")
    handle = slider.find_element(By.CSS_SELECTOR, ".noUi-handle")
    ActionChains(browser).click_and_hold(handle).move_by_offset(80, 0).pause(0.3).release().perform()
    wait_for(browser, lambda d: readout.text.strip() != before_value, 30, message="the slider's value to change")
    wait_for(browser, lambda d: box.find_element(By.CSS_SELECTOR, "img").get_attribute("src") != before_src, 60,
             message="the plot to redraw")
    browser.execute_script("arguments[0].scrollIntoView({block: 'end'});", box.find_element(By.CSS_SELECTOR, "img"))
    shot(browser, "lab01_slider_after")

    cell = cell_with(browser, "self_check(")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", cell)
    text = output_text(cell)
    shot(browser, "lab01_solved_self_check")
    assert "visible checks passed." in text and "still failing" not in text, text[-1500:]


def test_the_chinese_edition_reports_in_chinese(lab_server, browser):
    """A learner who opens zh/lab01 gets the self-check in Chinese: the kernel finds its
    notebook through the server (JPY_SESSION_NAME) and reads the edition's language."""
    text = stub_self_check(browser, lab_server, f"zh/{LAB}/{LAB}.ipynb", "项可见检查", "lab01_zh_stub_self_check")
    assert "自检" in text and "未通过" in text and "提示" in text, text[-1500:]
    assert "FAIL" not in text and "hint:" not in text, text[-1500:]
