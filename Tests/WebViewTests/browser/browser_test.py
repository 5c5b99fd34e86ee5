#!/usr/bin/env python3
"""The web view in a real browser: Debian's chromium, headless, driven by selenium through
Debian's chromium-driver; MQTT on the side with mosquitto_pub and mosquitto_sub.

    browser_test.py --url http://127.0.0.1:PORT --broker-port N --artifacts DIR
        opens the home, toggles the garage light on the page and sees its state change on MQTT,
        sets the brightness on MQTT and sees the page follow with no reload, enters an
        out-of-range brightness and sees the gateway's error on the page, and (after printing
        `restart-gateway` and reading a line on stdin) sees the page reconnect by itself.
        Screenshots of the home and of the accessory go to DIR.

    browser_test.py --url … --broker-port N --homes --artifacts DIR
        on the Homes page adds a home, sees it served on MQTT at once (its own base topic says
        online), makes it primary and sees the list say so, then removes it and sees its topics go.

    browser_test.py --url … --homekit --artifacts DIR
        on the HomeKit page of a gateway whose HomeKit bridge runs, sees the bridge's card with its
        setup code and QR code image, and saves the image as the browser drew it to
        DIR/web-homekit-qr.png (BrowserTests reads it with zbarimg); prints `setup-code: …`.

    browser_test.py --url … --scale N
        opens a home of N accessories and prints how long until every tile is drawn
        (`figure: tiles N in S s`), for the bench.

Exit status 0 when every step passed; a step that fails says which and why.
"""
import argparse
import atexit
import json
import os
import re
import subprocess
import shutil
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

LIGHT = "home/garage/garage-door-opener/garage-light"
GARAGE = "sim:garage"


def driver_service():
    """Debian's driver, never one selenium would download: the test runs with no internet. Its
    chromium makes its singleton's directory (`org.chromium.Chromium.*`) in TMPDIR and leaves it
    there even after a clean `quit()`: here TMPDIR is a directory of the script's own, removed
    at its exit."""
    private = tempfile.mkdtemp(prefix="homemqtt-chromium-")
    atexit.register(shutil.rmtree, private, ignore_errors=True)
    return Service("/usr/bin/chromedriver", env={**os.environ, "TMPDIR": private})


def browser(width=1280, height=1000, extra=()):
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={width},{height}", "--force-device-scale-factor=1", *extra):
        options.add_argument(argument)
    return webdriver.Chrome(service=driver_service(), options=options)


def step(name):
    print(f"step: {name}", flush=True)


def wait(driver, what, condition, timeout=10):
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition(d))
    except Exception:
        logs = driver.get_log("browser") if hasattr(driver, "get_log") else []
        raise AssertionError(f"timed out after {timeout} s waiting for {what}; browser log: {logs}")


def css(driver, selector):
    found = driver.find_elements(By.CSS_SELECTOR, selector)
    return found[0] if found else None


class Subscriber:
    """mosquitto_sub on one topic, its lines read as they come."""

    def __init__(self, port, topic):
        self.process = subprocess.Popen(
            ["mosquitto_sub", "-p", str(port), "-t", topic, "-F", "%r %p"],
            stdout=subprocess.PIPE, text=True, bufsize=1)

    def next(self, timeout=10):
        import select
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            raise AssertionError(f"no message on MQTT within {timeout} s")
        retain, _, payload = self.process.stdout.readline().rstrip("\n").partition(" ")
        return retain == "1", payload

    def close(self):
        self.process.terminate()
        self.process.wait(5)


def publish(port, topic, payload):
    subprocess.run(["mosquitto_pub", "-p", str(port), "-q", "1", "-t", topic, "-m", payload], check=True)


def main_test(args):
    driver = browser()
    try:
        step("open the home")
        started = time.monotonic()
        driver.get(args.url + "/")
        tile = wait(driver, "the garage's tile", lambda d: css(d, f'article.tile[data-acc="{GARAGE}"]'))
        print(f"figure: home with {len(driver.find_elements(By.CSS_SELECTOR, 'article.tile'))} tiles drawn in "
              f"{time.monotonic() - started:.3f} s", flush=True)
        wait(driver, "the live indicator", lambda d: css(d, "#link").get_attribute("data-state") == "live")
        assert "Kilgo Devices" in tile.text, tile.text
        # Issue 44: the tile says when the gateway last heard from the accessory, the exact time on hover.
        seen = wait(driver, "the garage's last seen", lambda d: css(d, f'article.tile[data-acc="{GARAGE}"] .seen'))
        wait(driver, "last seen shown", lambda d: seen.is_displayed())
        assert re.fullmatch(r"last seen \d+ (s|min) ago", seen.text), seen.text
        assert re.search(r"\(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\)$", seen.get_attribute("title")), \
            seen.get_attribute("title")
        driver.save_screenshot(f"{args.artifacts}/web-home.png")

        step("toggle the garage light on the page; its state changes on MQTT")
        # The garage light is the garage accessory's second service: its page has the toggle.
        driver.get(args.url + "/#/accessory/" + GARAGE.replace(":", "%3A"))
        driver.execute_script("window.__noReload = 1")
        toggle = wait(driver, "the light's toggle", lambda d: css(d, f'button[data-toggle="{LIGHT}"]'))
        seen = wait(driver, "the accessory's last seen", lambda d: css(d, f'.accessory-head [data-seen="{GARAGE}"]'))
        wait(driver, "its last seen shown", lambda d: seen.text.startswith("last seen "))
        seen_before = seen.get_attribute("title")
        states = Subscriber(args.broker_port, LIGHT + "/power-state/state")
        retained, before = states.next()
        assert retained, "the first state should be the retained one"
        toggle.click()
        retained, after = states.next(timeout=5)
        assert not retained and after != before, f"power-state went {before} → {after}"
        states.close()
        # The gateway heard from the accessory: the page's last seen moves on by itself.
        wait(driver, "a later last seen", lambda d: seen.get_attribute("title") != seen_before)
        assert re.fullmatch(r"last seen \d+ s ago", seen.text), seen.text
        switch = css(driver, f'input[data-role="switch"][data-topic="{LIGHT}/power-state"]')
        wait(driver, "the page's switch to follow", lambda d: switch.is_selected() == (after == "true"))

        step("set the brightness with mosquitto_pub; the page follows without a reload")
        cell = css(driver, f'[data-live="{LIGHT}/brightness"]')
        sent = time.monotonic()
        publish(args.broker_port, LIGHT + "/brightness/set", "17")
        wait(driver, "the brightness cell to say 17 %", lambda d: cell.text == "17 %", timeout=5)
        print(f"figure: mosquitto_pub → page shows it in {time.monotonic() - sent:.3f} s", flush=True)
        box = css(driver, f'input[data-role="number"][data-topic="{LIGHT}/brightness"]')
        assert box.get_attribute("value") == "17", box.get_attribute("value")
        assert driver.execute_script("return window.__noReload") == 1, "the page reloaded"

        step("enter an out-of-range brightness; the gateway's error shows on the page")
        box.click()
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys("140", Keys.ENTER)
        answer = css(driver, f'[data-answer="{LIGHT}/brightness"]')
        wait(driver, "the out-of-range answer", lambda d: "out-of-range" in answer.text)
        assert "brightness must be 0…100, got 140" in answer.text, answer.text
        assert "error" in answer.get_attribute("class")
        wait(driver, "the box back at the real value", lambda d: box.get_attribute("value") == "17")
        driver.save_screenshot(f"{args.artifacts}/web-accessory.png")

        step("the events page lists the refused set")
        driver.get(args.url + "/#/events")
        wait(driver, "the error in the list", lambda d: "out-of-range" in css(d, "#error-list").text)
        driver.save_screenshot(f"{args.artifacts}/web-events.png")

        step("the gateway restarts; the page reconnects by itself")
        driver.get(args.url + "/#/accessory/" + GARAGE.replace(":", "%3A"))
        wait(driver, "the accessory page", lambda d: css(d, f'[data-live="{LIGHT}/brightness"]'))
        driver.execute_script("window.__noReload = 2")
        print("restart-gateway", flush=True)
        wait(driver, "the page to notice", lambda d: css(d, "#link").get_attribute("data-state") != "live", 20)
        if sys.stdin.readline().strip() != "restarted":
            raise AssertionError("the test did not restart the gateway")
        wait(driver, "the page to be live again", lambda d: css(d, "#link").get_attribute("data-state") == "live", 20)
        publish(args.broker_port, LIGHT + "/brightness/set", "23")
        wait(driver, "the page to follow the new run",
             lambda d: css(d, f'[data-live="{LIGHT}/brightness"]').text == "23 %", timeout=5)
        assert driver.execute_script("return window.__noReload") == 2, "the page reloaded"
        print("browser test passed", flush=True)
    finally:
        driver.quit()


def homes_text(driver):
    """The Homes page's list, empty until the page has drawn it. Read in the page at once: a
    change of the home redraws the page, and an element found before is then gone."""
    return driver.execute_script("const list = document.getElementById('homes-list'); return list ? list.innerText : ''")


def home_rows(driver):
    """Each row's name cell with its badge, read in the page at once (the list is redrawn after
    every change)."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#homes-list tr')].map((r) => r.cells[0].innerText.trim())")


def home_button(driver, name, op):
    """Clicks the `op` button of the home named `name`; False while there is none. The click is
    made after the script returns: a confirmation it opens must not block the script."""
    return driver.execute_script(
        "const row = [...document.querySelectorAll('#homes-list tr')]"
        "  .find((r) => r.cells.length && r.cells[0].innerText.startsWith(arguments[0]));"
        "const button = row && row.querySelector('button[data-op=\"' + arguments[1] + '\"]');"
        "if (!button) return false; setTimeout(() => button.click(), 0); return true;", name, op)


def homes_test(args):
    driver = browser()
    try:
        step("the Homes page lists the home")
        driver.get(args.url + "/#/homes")
        wait(driver, "the first home's row", lambda d: "My Home" in homes_text(d), timeout=20)
        status = Subscriber(args.broker_port, "home-lake-cabin/$gateway/status")

        step("add a home on the page; it is served at once")
        css(driver, "#home-name").send_keys("Lake Cabin")
        css(driver, "#home-add").click()
        wait(driver, "the new row", lambda d: "home-lake-cabin" in homes_text(d))
        retained, payload = status.next(timeout=15)
        assert payload == "online", f"home-lake-cabin/$gateway/status said {payload!r}"

        step("make it primary; the list marks it")
        wait(driver, "the cabin's primary button", lambda d: home_button(d, "Lake Cabin", "primary"))
        wait(driver, "the primary badge on the cabin", lambda d: any(
            row == "Lake Cabin primary" for row in home_rows(d)))
        driver.save_screenshot(f"{args.artifacts}/web-homes.png")

        step("make the first home primary again and remove the cabin; its status is cleared")
        wait(driver, "the first home's primary button", lambda d: home_button(d, "My Home", "primary"))
        # The dialog asking to confirm the removal is accepted.
        wait(driver, "the cabin's remove button", lambda d: home_button(d, "Lake Cabin", "remove"))
        wait(driver, "the confirmation", lambda d: d.switch_to.alert)
        driver.switch_to.alert.accept()
        wait(driver, "the row gone", lambda d: "Lake Cabin" not in homes_text(d))
        while True:
            retained, payload = status.next(timeout=10)
            if payload == "":
                break
        status.close()
        print("homes test passed", flush=True)
    finally:
        driver.quit()


def homekit_test(args):
    driver = browser()
    try:
        step("the HomeKit page shows the bridge's setup card")
        driver.get(args.url + "/#/homekit")
        wait(driver, "the bridge's card", lambda d: d.execute_script(
            "const c = document.getElementById('bridge-card'); return c && !c.hidden"), timeout=20)
        step("its QR code image is loaded and drawn")
        wait(driver, "the QR code image", lambda d: d.execute_script(
            "const i = document.getElementById('bridge-qr'); return i.complete && i.naturalWidth > 0"))
        code = css(driver, "#bridge-code").text
        uri = css(driver, "#bridge-uri").text
        print(f"setup-code: {code}", flush=True)
        print(f"setup-uri: {uri}", flush=True)
        image = css(driver, "#bridge-qr")
        if image.size["width"] < 100:
            raise AssertionError(f"the QR code is drawn {image.size} px, too small to scan")
        image.screenshot(f"{args.artifacts}/web-homekit-qr.png")
        print("homekit test passed", flush=True)
    finally:
        driver.quit()


def scale(args):
    driver = browser()
    try:
        started = time.monotonic()
        driver.get(args.url + "/")
        wait(driver, f"{args.scale} tiles", lambda d: d.execute_script(
            "return document.querySelectorAll('article.tile').length") >= args.scale, timeout=60)
        elapsed = time.monotonic() - started
        # Measured in the page too: from navigation start to now.
        in_page = driver.execute_script("return performance.now()") / 1000
        print(f"figure: tiles {args.scale} in {elapsed:.3f} s (page clock {in_page:.3f} s)", flush=True)
        # Live and responsive while values change: updates counted for a few seconds, and a
        # request answered meanwhile (a round trip through the gateway).
        driver.execute_script(
            "window.__frames = 0; window.__values = 0; const s = App.socket; const o = s.onmessage;"
            "s.onmessage = (m) => { window.__frames++; o(m); };"
            "const a = App.applyValues; App.applyValues = (v) => { window.__values += Object.keys(v).length; a(v); };")
        window = 3
        time.sleep(window)
        frames, values = driver.execute_script("return [window.__frames, window.__values]")
        probe = time.monotonic()
        result = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "App.gatewayRequest('health', {}).then((a) => done(a.status));")
        answered = time.monotonic() - probe
        if result != "ok":
            raise AssertionError(f"the health request was answered {result}")
        print(f"figure: request answered in {answered:.3f} s; {frames / window:.1f} update frames/s, "
              f"{values / window:.0f} values/s received", flush=True)
        if args.artifacts:
            driver.save_screenshot(f"{args.artifacts}/web-scale.png")
        print(json.dumps({"tiles_seconds": elapsed, "frames_per_second": frames / window,
                          "values_per_second": values / window, "request_seconds": answered}), flush=True)
    finally:
        driver.quit()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--broker-port", type=int)
    parser.add_argument("--artifacts")
    parser.add_argument("--scale", type=int)
    parser.add_argument("--homes", action="store_true")
    parser.add_argument("--homekit", action="store_true")
    arguments = parser.parse_args()
    try:
        test = homekit_test if arguments.homekit else homes_test if arguments.homes else main_test
        (scale if arguments.scale else test)(arguments)
    except AssertionError as failure:
        print(f"FAILED: {failure}", flush=True)
        sys.exit(1)
    except Exception as failure:  # selenium's own errors (a driver that did not start, …): said on stdout too
        print(f"FAILED: {type(failure).__name__}: {failure}", flush=True)
        sys.exit(1)
