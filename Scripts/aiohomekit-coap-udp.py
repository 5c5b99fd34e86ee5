#!/usr/bin/env python3
"""aiohomekit's own HAP-over-CoAP controller, over its own aiocoap transport, against an accessory.

aiohomekit 4.0.1's CoAPHomeKitConnection (aiohomekit/controller/coap/connection.py), unchanged:
pair-setup on /1 with the setup code, pair-verify on /2 (from the aiocoap server context whose
EventResource takes the accessory's event PUTs on /), its accessory-info read (the attribute
database and every readable value), then a read, a write and a subscription to one
characteristic, and the event for it. Everything goes over UDP to coap://[HOST]:PORT; the Swift
test (Tests/HAPServerTests/CoAPUDPAiohomekitTests.swift) changes the value once it reads
SUBSCRIBED.

Prints `PAIRED <accessory id>`, `DATABASE <json: services' types and iids>`, `READ <iid> <value>`,
`WROTE <iid> <errors json>`, `SUBSCRIBED <iid> <errors json>`, `EVENT <iid> <value>`, `DONE`.

Usage: .venv/bin/python Scripts/aiohomekit-coap-udp.py HOST PORT SETUP-CODE BRIGHTNESS-IID NEW-VALUE
"""
import asyncio
import json
import sys

from aiohomekit.controller.coap.connection import CoAPHomeKitConnection
from aiohomekit.uuid import normalize_uuid


class Owner:
    """What the connection calls with events (CoAPPairing's role): they are queued here."""

    def __init__(self):
        self.events = asyncio.Queue()

    def event_received(self, event):
        self.events.put_nowait(event)


def say(line):
    print(line, flush=True)


async def main(host, port, setup_code, iid, new_value):
    owner = Owner()
    connection = CoAPHomeKitConnection(owner, host, port)
    salt, srp_b = await connection.do_pair_setup(False)
    pairing = await connection.do_pair_setup_finish(setup_code, salt, srp_b)
    say(f"PAIRED {pairing['AccessoryPairingID']}")

    # Pair-verify, then get_accessory_info: the database and every readable value.
    await connection.connect(pairing)
    services = [
        {"type": normalize_uuid(f"{s.type:X}"), "iid": s.instance_id, "characteristics": [c.instance_id for c in s.characteristics]}
        for a in connection.info.accessories
        for s in a.services
    ]
    say(f"DATABASE {json.dumps(services)}")

    read = await connection.read_characteristics([(1, iid)])
    say(f"READ {iid} {read[(1, iid)]['value']}")
    wrote = await connection.write_characteristics([(1, iid, new_value)])
    say(f"WROTE {iid} {json.dumps({str(k): v for k, v in wrote.items()})}")
    subscribed = await connection.subscribe_to([(1, iid)])
    say(f"SUBSCRIBED {iid} {json.dumps({str(k): v for k, v in subscribed.items()})}")

    event = await asyncio.wait_for(owner.events.get(), timeout=30)
    for (_, event_iid), body in event.items():
        say(f"EVENT {event_iid} {body['value']}")
    await connection.enc_ctx.coap_ctx.shutdown()
    say("DONE")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])))
