#!/usr/bin/env python3
"""Decodes HAP-over-Thread attribute databases (the body of a CoAP 0x09 response) with
aiohomekit's own decoder (aiohomekit.controller.coap.structs.Pdu09Database), and prints what it
read as JSON: one entry per file, the accessories, services and characteristics with their
types, iids, permissions, formats, units, ranges, steps, valid values and descriptions.

The Swift tests (Tests/HAPTests/ThreadFixtureTests.swift) run it on Tests/Fixtures/thread/ and
compare with HAP's own decoder (Sources/HAP/CoAP/), so the two are held to each other.

Usage: .venv/bin/python Scripts/aiohomekit-thread-database.py FILE.hex [FILE.hex ...]
  FILE.hex: the database as hex digits (whitespace ignored).
Needs the venv's aiohomekit (Scripts/bootstrap.sh installs it).
"""
import json
import os
import sys

from aiohomekit.controller.coap.structs import Pdu09Database
from aiohomekit.uuid import normalize_uuid


def characteristic(c):
    d = c.to_dict()
    min_max = c.min_max_value
    return {
        "iid": c.instance_id,
        "type": normalize_uuid(d["type"]),
        "properties": c.properties,
        # aiohomekit's own reading of the property bits, in its order
        "perms": d["perms"],
        "format_code": c.pf_format,
        "format": c.data_type_str,
        "unit_code": c.pf_unit,
        "unit": c.data_unit_str,
        "min": min_max[0] if min_max else None,
        "max": min_max[1] if min_max else None,
        "step": c.min_step,
        "valid_values": list(c.valid_values) if c.valid_values is not None else None,
        "valid_values_range": list(c.valid_values_range) if c.valid_values_range is not None else None,
        "description": c.user_descriptor.decode() if c.user_descriptor is not None else None,
    }


def service(s):
    return {
        "iid": s.instance_id,
        "type": normalize_uuid(f"{s.type:X}"),
        "properties": s.properties,
        "linked": list(s.linked_services) if s.linked_services else [],
        "characteristics": [characteristic(c) for c in s.characteristics],
    }


def main(paths):
    out = {}
    for path in paths:
        with open(path) as f:
            data = bytes.fromhex("".join(f.read().split()))
        db = Pdu09Database.decode(data)
        out[os.path.basename(path)] = [
            {"aid": a.instance_id, "services": [service(s) for s in a.services]} for a in db.accessories
        ]
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
