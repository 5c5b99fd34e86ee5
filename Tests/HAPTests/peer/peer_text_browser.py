#!/usr/bin/env python3
"""The web view's HomeKit page shows what a hostile peer announced as text, never as markup:
headless chromium (selenium, Debian's chromium-driver) searches the network on the page and
reads the row of `hostile_announcer.py … markup`.

    peer_text_browser.py --url http://127.0.0.1:PORT

Exit status 0 when the name and model are in their cells as text and no element the announcement
spelled (`#injected`, `#img-injected`) exists; otherwise says what was found.
"""
import argparse
import sys
import time
from pathlib import Path

from selenium.webdriver.common.by import By

# The browser tests' headless chromium (Debian's driver, a TMPDIR of the script's own).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "WebViewTests" / "browser"))
from browser_test import browser  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    args = parser.parse_args()
    driver = browser()
    try:
        driver.get(args.url + "/#/homekit")
        deadline = time.monotonic() + 30
        cells = None
        while time.monotonic() < deadline and cells is None:
            buttons = driver.find_elements(By.CSS_SELECTOR, "#discover-form button")
            if buttons:
                driver.find_element(By.ID, "discover-timeout").clear()
                driver.find_element(By.ID, "discover-timeout").send_keys("2")
                buttons[0].click()
                end = time.monotonic() + 8
                while time.monotonic() < end and cells is None:
                    cells = driver.execute_script(
                        "const row = [...document.querySelectorAll('#discovered tr')]"
                        ".find((r) => r.textContent.includes('Lamp'));"
                        "return row ? [...row.children].map((c) => c.textContent) : null;")
                    time.sleep(0.1)
            else:
                time.sleep(0.2)
        if cells is None:
            print("the hostile accessory never showed on the HomeKit page", file=sys.stderr)
            return 1
        injected = driver.execute_script(
            "return document.querySelectorAll('#injected, #img-injected, #discovered b, #discovered img').length")
        print(f"cells: {cells!r}; injected elements: {injected}", flush=True)
        ok = injected == 0 and '<b id="injected">Evil</b>' in cells[0] and cells[0].endswith("Lamp") \
            and cells[1].startswith('<img id="img-injected" src="x">')
        return 0 if ok else 1
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
