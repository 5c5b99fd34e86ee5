"""aiohomekit (PyPI) as the controller of HomeMQTT's HAP accessory server, driven line by line.

Each line on stdin is one JSON command; each answer is one JSON line on stdout:
  {"reply": <seq>, "ok": true, ...}  or  {"reply": <seq>, "ok": false, "error": "<exception class>", "message": ...}
Events from a subscription arrive as their own lines, as received from the accessory:
  {"event": "<pairing name>", "data": {"aid.iid": {"value": ...}}}

Commands ("seq" is echoed in "reply"):
  pair          host, port, pin, file          pair-setup, the pairing data saved to file
  open          name, file                     an IpPairing from the file (pair-verify on first use)
  accessories   name                           /accessories as aiohomekit lists them
  get           name, ids [[aid, iid], ...]    get_characteristics
  put           name, values [[aid, iid, v]]   put_characteristics
  subscribe     name, ids                      events printed as they come
  timed         name, aid, iid, value, pid     /prepare then a PUT with the pid, on aiohomekit's session
  add_pairing   name, id, key, permissions     add_pairing ("User" or "Admin")
  list_pairings name
  close         name

The accessory is reached at its address directly (no mDNS yet): IpDiscovery is given the
service description zeroconf would have produced, as aiohomekit_controller.py does.
"""
import asyncio
import json
import sys
import uuid

from aiohomekit.characteristic_cache import CharacteristicCacheMemory
from aiohomekit.controller.ip.discovery import IpDiscovery
from aiohomekit.controller.ip.pairing import IpPairing, format_characteristic_list
from aiohomekit.exceptions import AlreadyPairedError, HttpErrorResponse
from aiohomekit.model import Categories
from aiohomekit.model.feature_flags import FeatureFlags
from aiohomekit.model.status_flags import StatusFlags
from aiohomekit.zeroconf import HomeKitService


class DirectController:
    """What IpDiscovery and IpPairing need of a controller when nothing is discovered."""

    def __init__(self):
        self._char_cache = CharacteristicCacheMemory()
        self.pairings = {}


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def keyed(result):
    return {f"{aid}.{iid}": value for (aid, iid), value in result.items()}


class Driver:
    def __init__(self):
        self.controller = DirectController()
        self.pairings = {}

    @staticmethod
    def discovery(controller, cmd):
        description = HomeKitService(
            name="HomeMQTT Bridge", id="", model="", feature_flags=FeatureFlags(0),
            status_flags=StatusFlags.UNPAIRED, config_num=1, state_num=1, category=Categories.BRIDGE,
            protocol_version="1.1", type="_hap._tcp.local.", address=cmd["host"], addresses=[cmd["host"]],
            port=cmd["port"])
        return IpDiscovery(controller, description)

    async def pair(self, cmd):
        discovery = self.discovery(self.controller, cmd)
        try:
            finish = await discovery.async_start_pairing("bridge-" + uuid.uuid4().hex[:6])
            pairing = await finish(cmd["pin"])
        finally:
            await discovery.close()
        data = dict(pairing.pairing_data)
        await pairing.close()
        with open(cmd["file"], "w") as f:
            json.dump(data, f)
        return {"accessory": data["AccessoryPairingID"], "controller": data["iOSPairingId"],
                "key": data["iOSDeviceLTPK"]}

    async def open(self, cmd):
        with open(cmd["file"]) as f:
            data = json.load(f)
        pairing = IpPairing(self.controller, data)
        name = cmd["name"]
        # Events as they come off the wire. aiohomekit's listeners also hear a controller's own
        # writes (put_characteristics calls them locally), so they cannot tell who sent what.
        on_event = pairing.event_received

        def wire(event, name=name, on_event=on_event):
            emit({"event": name, "data": keyed(format_characteristic_list(dict(event)))})
            on_event(event)

        pairing.event_received = wire
        self.pairings[name] = pairing
        return {}

    async def accessories(self, cmd):
        return {"accessories": await self.pairings[cmd["name"]].list_accessories_and_characteristics()}

    async def get(self, cmd):
        result = await self.pairings[cmd["name"]].get_characteristics([tuple(i) for i in cmd["ids"]])
        return {"values": keyed(result)}

    async def put(self, cmd):
        result = await self.pairings[cmd["name"]].put_characteristics([tuple(v) for v in cmd["values"]])
        return {"statuses": keyed(result)}

    async def subscribe(self, cmd):
        result = await self.pairings[cmd["name"]].subscribe([tuple(i) for i in cmd["ids"]])
        return {"statuses": keyed(result or {})}

    async def timed(self, cmd):
        pairing = self.pairings[cmd["name"]]
        await pairing._ensure_connected()
        prepared = await pairing.connection.put_json("/prepare", {"ttl": 5000, "pid": cmd["pid"]})
        written = await pairing.connection.put_json(
            "/characteristics",
            {"characteristics": [{"aid": cmd["aid"], "iid": cmd["iid"], "value": cmd["value"]}], "pid": cmd["pid"]})
        return {"prepare": prepared, "write": written}

    async def identify_unpaired(self, cmd):
        """`POST /identify`, as a controller asks an accessory it has not paired with."""
        discovery = self.discovery(self.controller, cmd)
        try:
            await discovery.async_identify()
            return {"identified": True}
        except (AlreadyPairedError, HttpErrorResponse) as error:
            # aiohomekit raises on the HTTP 400 a paired accessory answers, before its body.
            return {"identified": False, "error": str(error)}
        finally:
            await discovery.close()

    async def identify(self, cmd):
        """A paired controller's identify: the first identify characteristic (the bridge's own)."""
        return {"identified": bool(await self.pairings[cmd["name"]].identify())}

    async def add_pairing(self, cmd):
        await self.pairings[cmd["name"]].add_pairing(cmd["id"], cmd["key"], cmd["permissions"])
        return {}

    async def list_pairings(self, cmd):
        return {"pairings": await self.pairings[cmd["name"]].list_pairings()}

    async def close(self, cmd):
        await self.pairings.pop(cmd["name"]).close()
        return {}


async def main():
    driver = Driver()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    emit({"ready": True})
    while True:
        line = await reader.readline()
        if not line:
            break
        cmd = json.loads(line)
        seq = cmd.get("seq")
        try:
            result = await getattr(driver, cmd["op"])(cmd)
            emit({"reply": seq, "ok": True, **result})
        except Exception as error:  # the test reads the class name: AuthenticationError, ...
            emit({"reply": seq, "ok": False, "error": type(error).__name__, "message": str(error)})
    for pairing in list(driver.pairings.values()):
        await pairing.close()


if __name__ == "__main__":
    asyncio.run(main())
