#!/usr/bin/env python3
"""HAP-python's side of homemqtt-bench scenario 8 (bridge): a HAP-python bridge serving the same
accessories as the gateway's bridge, from the description the bench writes beside the generated
accessory files (HomeGenerator: the same names, information and lightbulb services, in order).

Usage: bench-hap-python-bridge.py --home HOME.json --port P --pincode 031-45-154 --state FILE
HOME.json: [{"name", "manufacturer", "model", "serial", "firmware",
             "services": [{"name", "characteristics": {"On": false, "Brightness": 50, ...}}]}, ...]

Prints "READY <port> <HAP-python's version>" on stdout once it accepts connections. Commands on stdin, one per line:
  drive <seq> <count> <accessory name>|<service name>
      changes that accessory's service's Brightness <count> times inside HAP-python: 1, 2, …,
      99, 1, … and 100 last (a value never sent before it, so the controller knows the end),
      each sent at once (HAP-python's `immediate`, as it sends a button's press: by default it
      holds a characteristic's events for 0.5 s and sends only the last value), yielding to the
      loop after each one so that each is written before the next -> "DRIVEN <seq>"
Errors answer "ERR <message>". Exits on stdin EOF or SIGTERM. No mDNS: the bench connects to
127.0.0.1 directly.
"""
import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import threading
from importlib.metadata import version

from pyhap.accessory import Accessory, Bridge
from pyhap.accessory_driver import AccessoryDriver
from pyhap.const import CATEGORY_LIGHTBULB

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Tests", "HAPTests", "peer"))
from hap_peer import NoZeroconf  # noqa: E402  (the peer's stand-in for mDNS)

# Our characteristic names (HomeGenerator's YAML) as HAP-python calls them.
CHARACTERISTICS = {
    "power-state": "On", "brightness": "Brightness", "hue": "Hue", "saturation": "Saturation",
    "color-temperature": "ColorTemperature",
}


def make_accessory(driver, description):
    acc = Accessory(driver, description["name"])
    acc.category = CATEGORY_LIGHTBULB
    acc.set_info_service(
        firmware_revision=description["firmware"], manufacturer=description["manufacturer"],
        model=description["model"], serial_number=description["serial"])
    for service in description["services"]:
        chars = {CHARACTERISTICS[name]: value for name, value in service["characteristics"].items()}
        serv = acc.add_preload_service("Lightbulb", chars=[c for c in chars if c != "On"] + ["Name"])
        serv.configure_char("Name", value=service["name"])
        for name, value in chars.items():
            serv.configure_char(name, value=value)
    return acc


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pincode", default="031-45-154")
    parser.add_argument("--state", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    with open(args.home) as f:
        home = json.load(f)

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    driver = AccessoryDriver(
        address="127.0.0.1", port=args.port, persist_file=args.state, pincode=args.pincode.encode(), loop=loop,
        async_zeroconf_instance=NoZeroconf())
    bridge = Bridge(driver, "HAP-python Bench Bridge")
    by_name = {}
    for description in home:
        acc = make_accessory(driver, description)
        bridge.add_accessory(acc)
        by_name[description["name"]] = acc
    driver.add_accessory(bridge)

    def reply(line):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    async def drive(seq, acc, service_name, count):
        service = next(s for s in acc.services if s.display_name == "Lightbulb"
                       and s.get_characteristic("Name").value == service_name)
        char = service.get_characteristic("Brightness")
        for n in range(count):
            value = 100 if n == count - 1 else 1 + n % 99
            char.value = value
            # What Characteristic.notify does, with immediate=True (see the docstring).
            acc.publish(value, char, None, True)
            await asyncio.sleep(0)
        reply(f"DRIVEN {seq}")

    def handle(line):
        parts = line.strip().split(" ")
        try:
            if parts[0] == "drive":
                # Names hold spaces: "drive <seq> <count> <accessory name>|<service name>".
                seq, count = parts[1], int(parts[2])
                accessory, service = " ".join(parts[3:]).split("|")
                loop.create_task(drive(seq, by_name[accessory], service, count))
            elif parts[0]:
                reply(f"ERR unknown command {parts[0]}")
        except Exception as ex:  # a bad command must not kill the server
            reply(f"ERR {ex}")

    def read_stdin():
        for line in sys.stdin:
            loop.call_soon_threadsafe(handle, line)
        loop.call_soon_threadsafe(stop)

    stopping = []

    def stop():
        if not stopping:
            stopping.append(True)
            loop.create_task(shutdown())

    async def shutdown():
        try:
            await driver.async_stop()
        finally:
            loop.stop()

    async def start():
        # HAP-python prints its setup message on stdout; stdout is for our protocol.
        with contextlib.redirect_stdout(sys.stderr):
            await driver.async_start()
        port = driver.http_server.server.sockets[0].getsockname()[1]
        reply(f"READY {port} {version('HAP-python')}")
        threading.Thread(target=read_stdin, daemon=True).start()

    loop.add_signal_handler(signal.SIGTERM, stop)
    loop.add_signal_handler(signal.SIGINT, stop)
    loop.create_task(start())
    try:
        loop.run_forever()
    finally:
        loop.close()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
