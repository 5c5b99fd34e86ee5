"""aiohomekit (PyPI) as a second HomeKit controller for the pairing-transfer tests: it pairs with
a HAP-python accessory, saves the pairing the way Home Assistant's HomeKit Controller stores it
(.storage/core.config_entries, domain homekit_controller), and reads characteristics and the
accessory's pairings with that pairing afterwards.

Usage:
  aiohomekit_controller.py pair --host H --port P --pin XXX-XX-XXX --out FILE [--title T]
  aiohomekit_controller.py read --file FILE --aid A --iid I
  aiohomekit_controller.py pairings --file FILE

The accessory is reached at its address directly (no mDNS in the tests): aiohomekit's
IpDiscovery is given the service description zeroconf would have produced.
"""
import argparse
import asyncio
import json
import sys
import uuid

from aiohomekit.characteristic_cache import CharacteristicCacheMemory
from aiohomekit.controller.ip.discovery import IpDiscovery
from aiohomekit.controller.ip.pairing import IpPairing
from aiohomekit.model import Categories
from aiohomekit.model.feature_flags import FeatureFlags
from aiohomekit.model.status_flags import StatusFlags
from aiohomekit.zeroconf import HomeKitService


class DirectController:
    """What IpDiscovery and IpPairing need of a controller when nothing is discovered."""

    def __init__(self):
        self._char_cache = CharacteristicCacheMemory()
        self.pairings = {}


def entry(pairing_data, title):
    """One Home Assistant config entry of the homekit_controller domain."""
    return {
        "entry_id": uuid.uuid4().hex,
        "version": 1,
        "minor_version": 1,
        "domain": "homekit_controller",
        "title": title,
        "data": pairing_data,
        "options": {},
        "source": "zeroconf",
        "unique_id": pairing_data["AccessoryPairingID"].lower(),
        "disabled_by": None,
    }


def load(path):
    with open(path) as f:
        document = json.load(f)
    entries = [e for e in document["data"]["entries"] if e["domain"] == "homekit_controller"]
    return entries[0]["data"]


async def pair(args):
    description = HomeKitService(
        name=args.title, id="", model="", feature_flags=FeatureFlags(0), status_flags=StatusFlags.UNPAIRED,
        config_num=1, state_num=1, category=Categories.LIGHTBULB, protocol_version="1.1", type="_hap._tcp.local.",
        address=args.host, addresses=[args.host], port=args.port)
    controller = DirectController()
    discovery = IpDiscovery(controller, description)
    finish = await discovery.async_start_pairing(args.title)
    pairing = await finish(args.pin)
    data = dict(pairing.pairing_data)
    await pairing.close()
    document = {"version": 1, "minor_version": 5, "key": "core.config_entries",
                "data": {"entries": [entry(data, args.title)]}}
    with open(args.out, "w") as f:
        json.dump(document, f, indent=2)
    print("PAIRED", data["AccessoryPairingID"], data["iOSPairingId"])


async def read(args):
    pairing = IpPairing(DirectController(), load(args.file))
    result = await pairing.get_characteristics([(args.aid, args.iid)])
    await pairing.close()
    print("VALUE", json.dumps(result[(args.aid, args.iid)].get("value")))


async def pairings(args):
    pairing = IpPairing(DirectController(), load(args.file))
    for p in await pairing.list_pairings():
        print("PAIRING", p["pairingId"], p["controllerType"])
    await pairing.close()


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pair")
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pin", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--title", default="Peer Bridge")
    r = sub.add_parser("read")
    r.add_argument("--file", required=True)
    r.add_argument("--aid", type=int, required=True)
    r.add_argument("--iid", type=int, required=True)
    l = sub.add_parser("pairings")
    l.add_argument("--file", required=True)
    args = parser.parse_args()
    asyncio.run({"pair": pair, "read": read, "pairings": pairings}[args.command](args))


if __name__ == "__main__":
    sys.exit(main())
