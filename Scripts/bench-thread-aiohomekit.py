#!/usr/bin/env python3
"""aiohomekit 4.0.1's own HAP-over-CoAP controller as homemqtt-bench scenario 9's baseline client:
the same line protocol as our client (`homemqtt-bench thread-client`), so the bench drives both
the same way against the same kind of simulated Thread accessory (one each, served by the
gateway over UDP on ::1).

aiohomekit's CoAPHomeKitConnection (aiohomekit/controller/coap/connection.py), unchanged, on its
own aiocoap transport: pair-setup on /1, pair-verify on /2, the attribute database (0x09), then
reads, writes and a subscription.

Each line on stdin is one JSON command; each answer is one JSON line on stdout,
{"reply": <seq>, "ok": true, ...} or {"reply": <seq>, "ok": false, "error": ...}. Commands:
  pair       host, port, code   pair-setup and pair-verify; answers "iid", the Brightness's iid
  reads      count, iid         reads of one characteristic: seconds each, and "cpu", this
                                process's CPU seconds (user + system) over the loop
  writes     count, iid         writes of one (1…40): seconds each, and "cpu"
  subscribe  iid                events on
  listen     iid                from now on, events for iid are timed
  wait       timeout            waits for the value 100 on iid (a drive's last); answers how many
                                events came since `listen` and when the first and the last came
"""
import asyncio
import json
import resource
import sys
import time
from importlib.metadata import version

from aiohomekit.controller.coap.connection import CoAPHomeKitConnection
from aiohomekit.uuid import normalize_uuid

BRIGHTNESS = "00000008-0000-1000-8000-0026BB765291"
clock = time.perf_counter


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Driver:
    def __init__(self):
        self.connection = None
        self.listening = None

    def event_received(self, event):
        """CoAPPairing's role: the connection calls this with {(aid, iid): {"value": v}}."""
        listening = self.listening
        if listening is None:
            return
        for (_, iid), body in event.items():
            if iid != listening["iid"]:
                continue
            listening["times"].append(clock())
            if body.get("value") == 100 and not listening["done"].done():
                listening["done"].set_result(None)

    async def pair(self, cmd):
        self.connection = CoAPHomeKitConnection(self, cmd["host"], cmd["port"])
        salt, srp_b = await self.connection.do_pair_setup(False)
        pairing = await self.connection.do_pair_setup_finish(cmd["code"], salt, srp_b)
        await self.connection.connect(pairing)
        for accessory in self.connection.info.accessories:
            for service in accessory.services:
                for c in service.characteristics:
                    if normalize_uuid(f"{c.type:X}") == BRIGHTNESS:
                        return {"iid": c.instance_id, "version": version("aiohomekit")}
        raise ValueError("no Brightness in the accessory's database")

    async def reads(self, cmd):
        key, samples = (1, cmd["iid"]), []
        before = cpu()
        for _ in range(cmd["count"]):
            start = clock()
            answer = await self.connection.read_characteristics([key])
            samples.append(clock() - start)
            if "value" not in answer.get(key, {}):
                raise ValueError(f"read failed: {answer}")
        return {"samples": samples, "cpu": cpu() - before}

    async def writes(self, cmd):
        samples = []
        before = cpu()
        for n in range(cmd["count"]):
            start = clock()
            answer = await self.connection.write_characteristics([(1, cmd["iid"], 1 + n % 40)])
            samples.append(clock() - start)
            if answer:
                raise ValueError(f"write failed: {answer}")
        return {"samples": samples, "cpu": cpu() - before}

    async def subscribe(self, cmd):
        answer = await self.connection.subscribe_to([(1, cmd["iid"])])
        if answer:
            raise ValueError(f"subscribe failed: {answer}")
        return {}

    async def listen(self, cmd):
        done = asyncio.get_running_loop().create_future()
        self.listening = {"iid": cmd["iid"], "times": [], "done": done}
        return {}

    async def wait(self, cmd):
        listening = self.listening
        try:
            await asyncio.wait_for(listening["done"], cmd["timeout"])
        except asyncio.TimeoutError:
            raise ValueError(f"no value 100 after {len(listening['times'])} events") from None
        finally:
            self.listening = None
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
    if driver.connection is not None:
        await driver.connection.enc_ctx.coap_ctx.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
