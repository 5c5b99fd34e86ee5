#!/usr/bin/env python3
"""aiohomekit's side of homemqtt-bench scenario 4 (HAP): the same pair-verify, read and write
loops as HomeMQTT's controller, against the same accessory, with the same pairing.

Usage: bench-aiohomekit.py PAIRING.json --aid A --iid I --verifies N --reads N --writes N [--warmup N]
PAIRING.json is aiohomekit pairing data (AccessoryPairingID, AccessoryLTPK, iOSPairingId,
iOSDeviceLTSK, iOSDeviceLTPK, AccessoryIP, AccessoryPort, Connection). Prints one JSON object:
{"version": ..., "verify": [s, ...], "read": [s, ...], "write": [s, ...]}.
--warmup reads that many times, untimed, before the timed reads (scenario 7 runs the script under
callgrind, N reads against none, and keeps first-time costs out of the difference).

aiohomekit finds accessories with zeroconf; the peer has no mDNS, so the pairing is opened
directly: IpPairing's connection takes AccessoryIP/AccessoryPort from the pairing data and only
consults zeroconf when a description was discovered, which never happens here.
"""
import argparse
import asyncio
import json
import sys
import time
from importlib.metadata import version

from aiohomekit.characteristic_cache import CharacteristicCacheMemory
from aiohomekit.controller.ip.pairing import IpPairing


class DirectController:
    """Just what IpPairing needs of a controller when nothing is discovered: the cache of
    accessory structures, shared by every pairing object (as Home Assistant keeps one), so that
    only the first connection reads /accessories."""

    def __init__(self):
        self._char_cache = CharacteristicCacheMemory()


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("pairing")
    parser.add_argument("--aid", type=int, required=True)
    parser.add_argument("--iid", type=int, required=True)
    parser.add_argument("--verifies", type=int, default=20)
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=0)
    args = parser.parse_args()
    with open(args.pairing) as f:
        data = json.load(f)
    controller = DirectController()
    clock = time.perf_counter

    # Fills the structure cache, so that the timed connections below only connect and verify.
    pairing = IpPairing(controller, data)
    await pairing._ensure_connected()
    await pairing.close()

    verify = []
    for _ in range(args.verifies):
        pairing = IpPairing(controller, data)
        start = clock()
        await pairing._ensure_connected()
        verify.append(clock() - start)
        await pairing.close()

    pairing = IpPairing(controller, data)
    await pairing._ensure_connected()
    key = (args.aid, args.iid)
    for _ in range(args.warmup):
        await pairing.get_characteristics([key])
    reads = []
    # Process CPU time over the loops: the client's own work per request, whatever the peer spends.
    cpu = time.process_time()
    for _ in range(args.reads):
        start = clock()
        answer = await pairing.get_characteristics([key])
        reads.append(clock() - start)
        if "value" not in answer.get(key, {}):
            raise SystemExit(f"read failed: {answer}")
    read_cpu = (time.process_time() - cpu) / max(args.reads, 1)
    writes = []
    cpu = time.process_time()
    for n in range(args.writes):
        start = clock()
        answer = await pairing.put_characteristics([(args.aid, args.iid, 1 + n % 40)])
        writes.append(clock() - start)
        if answer:
            raise SystemExit(f"write failed: {answer}")
    write_cpu = (time.process_time() - cpu) / max(args.writes, 1)
    await pairing.close()
    json.dump(
        {"version": version("aiohomekit"), "verify": verify, "read": reads, "write": writes,
         "read_cpu": read_cpu, "write_cpu": write_cpu},
        sys.stdout)


asyncio.run(main())
