#!/usr/bin/env python3
"""DNS rebinding in a real browser: chromium resolves names of an attacker's to 127.0.0.1
(--host-resolver-rules, as a rebinding DNS server would make it), loads the web view under them
and tries what a page there would: read the home, write, open the live feed.

    rebinding_test.py --port N
        every name is refused (the page, the API, the WebSocket, a write), and the same browser
        at http://127.0.0.1:N/ goes live (so the refusals are the gateway's, not the setup's).

Exit status 0 when every step passed; a step that fails says which and why.
"""
import argparse
import json
import sys

from browser_test import browser, css, step, wait

NAMES = ["127.evil.example", "127.0.0.1.evil.example", "localhost.evil"]
LIGHT = "home/garage/garage-door-opener/garage-light"

PROBE = """
const done = arguments[arguments.length - 1];
const port = arguments[0];
const result = {};
const write = JSON.stringify({topic: arguments[1] + "/brightness/set", payload: "4"});
Promise.all([
  fetch("/api/home").then(r => result.home = r.status, e => result.home = "error " + e),
  fetch("/api/request", {method: "POST", body: write}).then(r => result.write = r.status,
                                                            e => result.write = "error " + e),
  new Promise(resolve => {
    const socket = new WebSocket(`ws://${location.hostname}:${port}/ws`);
    socket.onopen = () => { result.ws = "open"; socket.close(); resolve(); };
    socket.onerror = () => { result.ws = result.ws || "refused"; resolve(); };
    setTimeout(() => { result.ws = result.ws || "timeout"; resolve(); }, 5000);
  }),
]).then(() => done(JSON.stringify(result)));
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    rules = ", ".join(f"MAP {name} 127.0.0.1" for name in NAMES)
    driver = browser(extra=[f"--host-resolver-rules={rules}"])
    try:
        for name in NAMES:
            step(f"load http://{name}:{args.port}/")
            driver.get(f"http://{name}:{args.port}/")
            body = driver.find_element("tag name", "body").text
            if "forbidden-origin" not in body:
                raise AssertionError(f"{name}: the page was served: {body[:200]!r}")
            if css(driver, "#link") is not None:
                raise AssertionError(f"{name}: the page's script is there")
            driver.set_script_timeout(15)
            result = json.loads(driver.execute_async_script(PROBE, args.port, LIGHT))
            print(f"{name}: {result}", flush=True)
            if result.get("home") != 403 or result.get("write") != 403 or result.get("ws") == "open":
                raise AssertionError(f"{name}: not refused: {result}")
        step(f"load http://127.0.0.1:{args.port}/")
        driver.get(f"http://127.0.0.1:{args.port}/")
        wait(driver, "the live indicator", lambda d: css(d, "#link") and
             css(d, "#link").get_attribute("data-state") == "live", 20)
        print("rebinding test passed", flush=True)
    finally:
        driver.quit()


if __name__ == "__main__":
    try:
        main()
    except AssertionError as failure:
        print(f"FAILED: {failure}", flush=True)
        sys.exit(1)
