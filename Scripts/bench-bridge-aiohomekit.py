#!/usr/bin/env python3
"""The controller of homemqtt-bench scenario 8 (bridge): aiohomekit, the same driver for the
gateway's bridge and for HAP-python's, driven line by line so that the bench can sample each
server's CPU time around each loop and drive changes while this waits for their events.

Each line on stdin is one JSON command; each answer is one JSON line on stdout,
{"reply": <seq>, "ok": true, ...} or {"reply": <seq>, "ok": false, "error": ...}. Commands:
  pair        side, host, port, pin, file   pair-setup; the pairing data saved to file
  open        side, file, targets           one IpPairing, verified; /accessories listed once
                                            (aiohomekit's structure cache, so that later
                                            connections only verify); answers the counts of
                                            accessories, services and characteristics, and as
                                            "ids" the [aid, iid] of the Brightness of each
                                            target [accessory name, service name]
  verify      side, count                   new connections: TCP connect + pair-verify, seconds each
  accessories side, count                   GET /accessories on the open connection, seconds each
  reads       side, count, id               GET /characteristics of one, seconds each
  writes      side, count, id               PUT /characteristics of one (1…40), seconds each
  subscribe   side, id                      events on
  listen      side, id                      from now on, events for id are timed
  wait        side, timeout                 waits for the value 100 on id (a drive's last);
                                            answers how many events came for id since
                                            `listen` and when the first and the last came
The pairings are opened directly at 127.0.0.1 and their port (no mDNS), as bench-aiohomekit.py does.
"""
import asyncio
import json
import sys
import time
import uuid
from importlib.metadata import version

from aiohomekit.characteristic_cache import CharacteristicCacheMemory
from aiohomekit.controller.ip.discovery import IpDiscovery
from aiohomekit.controller.ip.pairing import IpPairing, format_characteristic_list
from aiohomekit.exceptions import AuthenticationError
from aiohomekit.model import Categories
from aiohomekit.model.feature_flags import FeatureFlags
from aiohomekit.model.status_flags import StatusFlags
from aiohomekit.zeroconf import HomeKitService

BRIGHTNESS = "00000008-0000-1000-8000-0026BB765291"
NAME = "00000023-0000-1000-8000-0026BB765291"
clock = time.perf_counter


class DirectController:
    """What IpDiscovery and IpPairing need of a controller when nothing is discovered."""

    def __init__(self):
        self._char_cache = CharacteristicCacheMemory()
        self.pairings = {}


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def name_of(entry):
    for c in entry.get("characteristics", []):
        if c.get("type", "").upper() in (NAME, "23"):
            return c.get("value")
    return None


# GatewayRoute.serviceType in Sources/HomeModel/GatewayRoute.swift.
ROUTE_SERVICE = "318D0DC1-9886-4226-B388-11D7B6A0E1D2"


def full_type(t):
    t = t.upper()
    return t if "-" in t else t.rjust(8, "0") + "-0000-1000-8000-0026BB765291"


def brightness(accessories, accessory, service):
    """[aid, iid] of the Brightness of the service named `service` of the accessory named `accessory`."""
    for a in accessories:
        info = next((s for s in a["services"] if full_type(s["type"]).startswith("0000003E")), None)
        if info is None or name_of(info) != accessory:
            continue
        for s in a["services"]:
            if name_of(s) != service:
                continue
            for c in s["characteristics"]:
                if full_type(c["type"]) == BRIGHTNESS:
                    return [a["aid"], c["iid"]]
    raise ValueError(f"no Brightness of {accessory} / {service}")


class Driver:
    def __init__(self):
        self.controller = DirectController()
        self.data = {}
        self.pairings = {}
        self.events = {}  # side -> {"id": (aid, iid), "times": [...], "done": future}

    async def pair(self, cmd):
        description = HomeKitService(
            name=cmd["side"], id="", model="", feature_flags=FeatureFlags(0), status_flags=StatusFlags.UNPAIRED,
            config_num=1, state_num=1, category=Categories.BRIDGE, protocol_version="1.1", type="_hap._tcp.local.",
            address="127.0.0.1", addresses=["127.0.0.1"], port=cmd["port"])
        # HAP-python's SRP (pyhap/hsrp.py) hashes S, K and B without their leading zero bytes,
        # where aiohomekit pads them: about one pair-setup in 85 with HAP-python ends in an
        # authentication error at M4 (seen in CI). A new attempt draws new secrets, so the
        # baseline is given three. Ours pads every number and gets one attempt: a failure there
        # is a bug of ours.
        attempts = 3 if cmd["side"] == "hap-python" else 1
        for attempt in range(1, attempts + 1):
            discovery = IpDiscovery(self.controller, description)
            try:
                finish = await discovery.async_start_pairing("bench-" + uuid.uuid4().hex[:6])
                pairing = await finish(cmd["pin"])
                break
            except AuthenticationError as error:
                if attempt == attempts:
                    raise AuthenticationError(f"{cmd['side']}: {error}") from error
            finally:
                await discovery.close()
        data = dict(pairing.pairing_data)
        await pairing.close()
        with open(cmd["file"], "w") as f:
            json.dump(data, f)
        return {}

    def wire(self, side, pairing):
        on_event = pairing.event_received

        def received(event):
            listening = self.events.get(side)
            if listening:
                for (aid, iid), value in format_characteristic_list(dict(event)).items():
                    if (aid, iid) == listening["id"]:
                        listening["times"].append(clock())
                        if value.get("value") == 100 and not listening["done"].done():
                            listening["done"].set_result(None)
            on_event(event)

        pairing.event_received = received

    async def open(self, cmd):
        side = cmd["side"]
        with open(cmd["file"]) as f:
            self.data[side] = json.load(f)
        pairing = IpPairing(self.controller, self.data[side])
        self.wire(side, pairing)
        await pairing._ensure_connected()
        self.pairings[side] = pairing
        document = await pairing.connection.get_json("/accessories")
        accessories = document["accessories"]
        # HomeMQTT serves a hidden route service on each accessory (its loop guard across
        # gateways, Docs/homekit-bridge.md "Loops"): not one of the accessories' own, so the
        # count that says both sides serve the same accessories leaves it out. GET /accessories
        # still carries it, so our side's document is that much larger.
        services = [s for a in accessories for s in a["services"] if full_type(s["type"]) != ROUTE_SERVICE]
        ids = [brightness(accessories, accessory, service) for accessory, service in cmd["targets"]]
        return {"accessories": len(accessories), "services": len(services),
                "characteristics": sum(len(s["characteristics"]) for s in services), "ids": ids,
                "version": version("aiohomekit")}

    async def verify(self, cmd):
        samples = []
        for _ in range(cmd["count"]):
            pairing = IpPairing(self.controller, self.data[cmd["side"]])
            start = clock()
            await pairing._ensure_connected()
            samples.append(clock() - start)
            await pairing.close()
        return {"samples": samples}

    async def accessories(self, cmd):
        connection = self.pairings[cmd["side"]].connection
        samples = []
        for _ in range(cmd["count"]):
            start = clock()
            document = await connection.get_json("/accessories")
            samples.append(clock() - start)
            if not document.get("accessories"):
                raise ValueError("an empty /accessories")
        return {"samples": samples}

    async def reads(self, cmd):
        pairing, key = self.pairings[cmd["side"]], tuple(cmd["id"])
        samples = []
        for _ in range(cmd["count"]):
            start = clock()
            answer = await pairing.get_characteristics([key])
            samples.append(clock() - start)
            if "value" not in answer.get(key, {}):
                raise ValueError(f"read failed: {answer}")
        return {"samples": samples}

    async def writes(self, cmd):
        pairing, (aid, iid) = self.pairings[cmd["side"]], cmd["id"]
        samples = []
        for n in range(cmd["count"]):
            start = clock()
            answer = await pairing.put_characteristics([(aid, iid, 1 + n % 40)])
            samples.append(clock() - start)
            if answer:
                raise ValueError(f"write failed: {answer}")
        return {"samples": samples}

    async def subscribe(self, cmd):
        await self.pairings[cmd["side"]].subscribe([tuple(cmd["id"])])
        return {}

    async def listen(self, cmd):
        future = asyncio.get_running_loop().create_future()
        self.events[cmd["side"]] = {"id": tuple(cmd["id"]), "times": [], "done": future}
        return {}

    async def wait(self, cmd):
        side = cmd["side"]
        listening = self.events[side]
        try:
            await asyncio.wait_for(listening["done"], cmd["timeout"])
        except asyncio.TimeoutError:
            raise ValueError(f"no value 100 after {len(listening['times'])} events") from None
        finally:
            self.events.pop(side, None)
        times = listening["times"]
        return {"count": len(times), "first": times[0], "last": times[-1]}


async def main():
    driver = Driver()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    emit({"ready": True})
    while True:
        line = await reader.readline()
        if not line:
            break
        cmd = json.loads(line)
        try:
            result = await getattr(driver, cmd["op"])(cmd)
            emit({"reply": cmd.get("seq"), "ok": True, **result})
        except Exception as error:
            emit({"reply": cmd.get("seq"), "ok": False, "error": f"{type(error).__name__}: {error}"})
    for pairing in driver.pairings.values():
        await pairing.close()


if __name__ == "__main__":
    asyncio.run(main())
