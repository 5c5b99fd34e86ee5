#!/usr/bin/env python3
"""aiohomekit 4.0.1 as Home Assistant uses it: finds an accessory by its pairing id over mDNS
(python-zeroconf, its own browser) and pairs with it, nothing else given.

    aiohomekit_mdns_pair.py --id AA:BB:CC:DD:EE:FF --pin 314-15-926 [--interface 127.0.0.1]

Prints one JSON line: {"id", "name", "address", "port", "status-flags", "paired"}; exit status 1
with the error on stderr when it is not found or does not pair.
"""
import argparse
import asyncio
import json
import sys

from aiohomekit import Controller
from zeroconf import IPVersion
from zeroconf.asyncio import AsyncServiceBrowser, AsyncZeroconf


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--id", required=True)
    parser.add_argument("--pin", required=True)
    parser.add_argument("--interface", default="127.0.0.1")
    args = parser.parse_args()
    azc = AsyncZeroconf(interfaces=[args.interface], ip_version=IPVersion.V4Only)
    # aiohomekit reads the browser's cache, as Home Assistant's zeroconf integration fills it.
    browser = AsyncServiceBrowser(azc.zeroconf, ["_hap._tcp.local.", "_hap._udp.local."], handlers=[lambda **_: None])
    controller = Controller(async_zeroconf_instance=azc)
    await controller.async_start()
    try:
        discovery = await controller.async_find(args.id, timeout=20)
        description = discovery.description
        finish = await discovery.async_start_pairing("mdns")
        pairing = await finish(args.pin)
        print(json.dumps({
            "id": description.id, "name": description.name, "address": description.address,
            "port": description.port, "status-flags": int(description.status_flags),
            "paired": pairing is not None,
        }), flush=True)
        await pairing.close()
    finally:
        await controller.async_stop()
        await browser.async_cancel()
        await azc.async_close()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as error:  # noqa: BLE001 - the test reads the reason
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
