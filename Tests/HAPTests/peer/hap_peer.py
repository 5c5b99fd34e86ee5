#!/usr/bin/env python3
"""A real HAP accessory server (HAP-python) for HomeMQTT's HAP tests.

Usage: hap_peer.py --port P --pincode 031-45-154 --state FILE [--bridge] [--mac AA:BB:..] [--mdns]

Without --mdns it does not advertise (the tests talk to 127.0.0.1 directly); with --mdns it
advertises `_hap._tcp` through python-zeroconf on 127.0.0.1, as a real accessory does on its
network (the tests run it in a network namespace whose loopback carries multicast).

Prints "READY <port>" on stdout once it accepts connections (port 0 picks a free one).
Commands on stdin, one per line; each answers one line on stdout:
  set <aid> <iid> <json-value>   change a value inside the accessory (subscribers are notified)
                                  -> "OK"
  get <aid> <iid>                 -> "VALUE <aid> <iid> <json-value>"
  pairings                        -> "PAIRINGS <n>"
  add-switch <name>               add a bridged switch and bump the configuration number
                                  -> "OK <aid>"
  drop                            close all controller connections -> "OK"
  find <CharacteristicName>       the first characteristic of that name -> "OK <aid> <iid>"
  announce <addr>[,<addr>...]     advertise these addresses from now on (mDNS, with the
                                  cache-flush bit: they replace the ones announced before) -> "OK"
  timings                         the peer's own time per request handled since the last
                                  `timings` (decrypt, HTTP, handler, encrypt, write), for the
                                  benchmark's floor -> "TIMINGS <n> <median µs> <total µs>"
Errors answer "ERR <message>". Exits cleanly on stdin EOF or SIGTERM.
"""
import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time

from pyhap.accessory import Accessory, Bridge
from pyhap.accessory_driver import AccessoryDriver
from pyhap.const import CATEGORY_LIGHTBULB


class NoZeroconf:
    """Stands in for AsyncZeroconf: the tests talk to 127.0.0.1 directly, no mDNS."""

    async def async_register_service(self, *args, **kwargs):
        return None

    async def async_unregister_service(self, *args, **kwargs):
        return None

    async def async_update_service(self, *args, **kwargs):
        return None

    async def async_close(self, *args, **kwargs):
        return None


def make_lightbulb(driver, name, aid=None):
    acc = Accessory(driver, name, aid=aid)
    acc.category = CATEGORY_LIGHTBULB
    serv = acc.add_preload_service("Lightbulb", chars=["Brightness"])
    serv.configure_char("On", value=False)
    serv.configure_char("Brightness", value=50)
    acc.set_info_service(firmware_revision="1.0.0", manufacturer="HomeMQTT Tests", model="Peer Bulb", serial_number="PEER-BULB-1")
    return acc


def make_switch(driver, name):
    acc = Accessory(driver, name)
    serv = acc.add_preload_service("Switch")
    serv.configure_char("On", value=False)
    acc.set_info_service(manufacturer="HomeMQTT Tests", model="Peer Switch", serial_number="PEER-SW-" + name)
    return acc


def make_sensor(driver, name):
    acc = Accessory(driver, name)
    serv = acc.add_preload_service("TemperatureSensor")
    serv.configure_char("CurrentTemperature", value=21.5)
    acc.set_info_service(manufacturer="HomeMQTT Tests", model="Peer Sensor", serial_number="PEER-TEMP-1")
    return acc


def make_garage(driver, name):
    acc = Accessory(driver, name)
    serv = acc.add_preload_service("GarageDoorOpener")
    current = serv.configure_char("CurrentDoorState", value=1)
    serv.configure_char("ObstructionDetected", value=False)

    def on_target(value):
        # A door that arrives at once: current follows target.
        current.set_value(value)

    serv.configure_char("TargetDoorState", value=1, setter_callback=on_target)
    acc.set_info_service(manufacturer="HomeMQTT Tests", model="Peer Garage", serial_number="PEER-GARAGE-1")
    return acc


HANDLING_SECONDS = []


def time_request_handling():
    """Records how long HAP-python itself takes over each piece of data a controller sends.

    A read or write is answered inside `data_received` (decrypt, parse, dispatch, encrypt,
    write to the socket), so its duration is the accessory's own share of a request's latency:
    a floor that no controller can go below."""
    from pyhap.hap_protocol import HAPServerProtocol

    original = HAPServerProtocol.data_received

    def timed(self, data):
        start = time.perf_counter()
        try:
            return original(self, data)
        finally:
            HANDLING_SECONDS.append(time.perf_counter() - start)

    HAPServerProtocol.data_received = timed


def find_char(driver, aid, iid):
    top = driver.accessory
    acc = top.accessories.get(aid) if isinstance(top, Bridge) and aid != 1 else (top if aid == 1 else None)
    if acc is None:
        raise KeyError(f"no accessory {aid}")
    char = acc.iid_manager.get_obj(iid)
    if char is None or not hasattr(char, "set_value"):
        raise KeyError(f"no characteristic {aid}.{iid}")
    return char


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--pincode", default="031-45-154")
    parser.add_argument("--state", required=True)
    parser.add_argument("--bridge", action="store_true")
    parser.add_argument("--mac", default=None)
    parser.add_argument("--debug", action="store_true")
    parser.add_argument("--mdns", action="store_true")
    parser.add_argument(
        "--address", default="127.0.0.1",
        help="where it listens, advertises and runs mDNS (comma-separated for several)")
    parser.add_argument("--listen", default=None, help="where it listens instead (comma-separated)")
    parser.add_argument("--advertise", default=None, help="what it advertises instead (comma-separated)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, stream=sys.stderr)

    port = args.port
    if port == 0:
        # HAP-python turns port 0 into its default 51827; pick a free port ourselves.
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]

    time_request_handling()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    addresses = args.address.split(",")
    # asyncio's create_server takes a list of hosts: one listening socket each.
    listen = args.listen.split(",") if args.listen else addresses
    driver = AccessoryDriver(
        address=addresses[0], port=port, persist_file=args.state, pincode=args.pincode.encode(),
        mac=args.mac, loop=loop, listen_address=listen if len(listen) > 1 else listen[0],
        advertised_address=args.advertise.split(",") if args.advertise else addresses,
        **({"interface_choice": addresses} if args.mdns else {"async_zeroconf_instance": NoZeroconf()}),
    )
    if args.bridge:
        top = Bridge(driver, "Peer Bridge")
        top.set_info_service(manufacturer="HomeMQTT Tests", model="Peer Bridge", serial_number="PEER-BRIDGE-1", firmware_revision="5.0.0")
        top.add_accessory(make_lightbulb(driver, "Peer Light"))
        top.add_accessory(make_switch(driver, "Peer Switch"))
        top.add_accessory(make_sensor(driver, "Peer Sensor"))
        top.add_accessory(make_garage(driver, "Peer Garage"))
    else:
        top = make_lightbulb(driver, "Peer Light")
    driver.add_accessory(top)

    def reply(line):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def handle(line):
        parts = line.strip().split(" ", 3)
        try:
            if not parts or parts[0] == "":
                return
            if parts[0] == "set":
                char = find_char(driver, int(parts[1]), int(parts[2]))
                char.set_value(json.loads(parts[3]))
                reply("OK")
            elif parts[0] == "get":
                char = find_char(driver, int(parts[1]), int(parts[2]))
                reply(f"VALUE {parts[1]} {parts[2]} {json.dumps(char.get_value())}")
            elif parts[0] == "pairings":
                reply(f"PAIRINGS {len(driver.state.paired_clients)}")
            elif parts[0] == "timings":
                samples = sorted(HANDLING_SECONDS)
                HANDLING_SECONDS.clear()
                median = samples[len(samples) // 2] * 1e6 if samples else 0.0
                reply(f"TIMINGS {len(samples)} {median:.1f} {sum(samples) * 1e6:.1f}")
            elif parts[0] == "find":
                top = driver.accessory
                accs = [top] + (list(top.accessories.values()) if isinstance(top, Bridge) else [])
                found = [
                    (acc.aid, acc.iid_manager.get_iid(char))
                    for acc in accs for serv in acc.services for char in serv.characteristics
                    if char.display_name == parts[1]
                ]
                if not found:
                    raise KeyError(f"no characteristic {parts[1]}")
                reply(f"OK {found[0][0]} {found[0][1]}")
            elif parts[0] == "announce":
                driver.state.addresses = parts[1].split(",")
                driver.async_update_advertisement()
                reply("OK")
            elif parts[0] == "drop":
                # Close every controller connection, as an accessory does when it reboots.
                for conn in list(driver.http_server.connections.values()):
                    conn.close()
                reply("OK")
            elif parts[0] == "add-switch":
                if not isinstance(driver.accessory, Bridge):
                    raise ValueError("not a bridge")
                acc = make_switch(driver, " ".join(parts[1:]) or "Extra Switch")
                driver.accessory.add_accessory(acc)
                driver.config_changed()
                reply(f"OK {acc.aid}")
            elif parts[0] == "echo":
                # A listener on the accessory's own event loop that sends back what it gets:
                # what any client's request costs in this process's loop and the kernel, with
                # no HAP work at all (the bench's transport floor).
                class Echo(asyncio.Protocol):
                    def connection_made(self, transport):
                        self.transport = transport

                    def data_received(self, data):
                        self.transport.write(data)

                # Commands run on the loop: the listener is made by a task, which answers.
                async def listen():
                    server = await loop.create_server(Echo, "127.0.0.1", 0)
                    reply(f"OK {server.sockets[0].getsockname()[1]}")

                loop.create_task(listen())
            elif parts[0] == "remove-accessory":
                # A bridge that loses a device: gone from /accessories, and c# goes up.
                del driver.accessory.accessories[int(parts[1])]
                driver.config_changed()
                reply("OK")
            else:
                reply(f"ERR unknown command {parts[0]}")
        except Exception as ex:  # a bad command must not kill the peer
            reply(f"ERR {ex}")

    stopping = threading.Event()

    def stop():
        if stopping.is_set():
            return
        stopping.set()
        asyncio.run_coroutine_threadsafe(shutdown(), loop)

    async def shutdown():
        try:
            await driver.async_stop()
        finally:
            loop.stop()

    def read_stdin():
        for line in sys.stdin:
            loop.call_soon_threadsafe(handle, line)
        stop()

    async def start():
        # HAP-python prints its setup message on stdout; stdout is for our protocol.
        with contextlib.redirect_stdout(sys.stderr):
            await driver.async_start()
        port = driver.http_server.server.sockets[0].getsockname()[1]
        driver.state.port = port
        reply(f"READY {port}")
        threading.Thread(target=read_stdin, daemon=True).start()

    loop.add_signal_handler(signal.SIGTERM, stop)
    loop.add_signal_handler(signal.SIGINT, stop)
    loop.create_task(start())
    try:
        loop.run_forever()
    finally:
        loop.close()
    sys.stdout.flush()
    # The stdin reader thread may still hold stdin's lock; skip interpreter teardown.
    os._exit(0)


if __name__ == "__main__":
    main()
