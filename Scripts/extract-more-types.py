#!/usr/bin/env python3
"""Extracts the standard HAP types that HAP-python's catalog lacks from HAP-NodeJS's definitions
(metadata) and aiohomekit's type lists (names), into Tests/Fixtures/hap-catalog/more-*.json in
HAP-python's catalog format, for Scripts/generate-catalog.py.

Usage: python3 Scripts/extract-more-types.py HAP_NODEJS_DEFINITIONS_DIR AIOHOMEKIT_MODEL_DIR
  HAP_NODEJS_DEFINITIONS_DIR: holds CharacteristicDefinitions.ts and ServiceDefinitions.ts
    (HAP-NodeJS src/lib/definitions/, Apache-2.0)
  AIOHOMEKIT_MODEL_DIR: holds characteristic_types.py and service_types.py
    (aiohomekit aiohomekit/model/{characteristics,services}/, Apache-2.0)
Run it again when either project adds types; the data it writes is committed.
"""
import json
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CATALOG = os.path.join(REPO, "Tests", "Fixtures", "hap-catalog")
BASE = "-0000-1000-8000-0026BB765291"
FORMATS = {"BOOL": "bool", "DATA": "data", "FLOAT": "float", "INT": "int", "STRING": "string", "TLV8": "tlv8",
           "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32", "UINT64": "uint64"}
PERMS = {"NOTIFY": "ev", "PAIRED_READ": "pr", "PAIRED_WRITE": "pw", "TIMED_WRITE": "tw", "WRITE_RESPONSE": "wr",
         "HIDDEN": "hd", "ADDITIONAL_AUTHORIZATION": "aa"}
UNITS = {"ARC_DEGREE": "arcdegrees", "CELSIUS": "celsius", "LUX": "lux", "PERCENTAGE": "percentage",
         "SECONDS": "seconds"}


def hap_nodejs_characteristics(text):
    out = {}
    for m in re.finditer(r'export class (\w+) extends Characteristic \{(.*?)\n\}', text, re.S):
        name, body = m.group(1), m.group(2)
        uuid = re.search(r'UUID: string = "([0-9A-F-]+)"', body).group(1)
        spec = {"UUID": uuid}
        if f := re.search(r"format: Formats\.(\w+)", body):
            spec["Format"] = FORMATS[f.group(1)]
        spec["Permissions"] = [PERMS[p] for p in re.findall(r"Perms\.(\w+)", body) if p in PERMS]
        if u := re.search(r"unit: Units\.(\w+)", body):
            if u.group(1) in UNITS:
                spec["unit"] = UNITS[u.group(1)]
        for key, out_key in (("minValue", "minValue"), ("maxValue", "maxValue"), ("minStep", "minStep"),
                             ("maxLen", "MaximumLength")):
            if v := re.search(rf"{key}: (-?[0-9.]+)", body):
                number = float(v.group(1))
                spec[out_key] = int(number) if number == int(number) else number
        # Named constants (`public static readonly SINGLE_PRESS = 0;`) name the valid values.
        values = {k: int(v) for k, v in re.findall(r"public static readonly (\w+) = (\d+);", body)}
        allowed = re.search(r"validValues: \[([0-9, ]*)\]", body)
        if values and allowed:
            allowed_set = {int(x) for x in allowed.group(1).split(",") if x.strip()}
            values = {k: v for k, v in values.items() if v in allowed_set}
        if values and len(set(values.values())) == len(values):
            spec["ValidValues"] = {"".join(p.capitalize() for p in k.split("_")): v for k, v in values.items()}
        out[name] = spec
    return out


def hap_nodejs_services(text):
    out = {}
    for m in re.finditer(r'export class (\w+) extends Service \{(.*?)\n\}', text, re.S):
        name, body = m.group(1), m.group(2)
        uuid = re.search(r'UUID: string = "([0-9A-F-]+)"', body).group(1)
        required = re.findall(r"this\.addCharacteristic\(Characteristic\.(\w+)\)", body)
        optional = re.findall(r"this\.addOptionalCharacteristic\(Characteristic\.(\w+)\)", body)
        out[name] = {"UUID": uuid, "RequiredCharacteristics": required, "OptionalCharacteristics": optional}
    return out


def aiohomekit_names(text):
    """`SERVICE_SIGNATURE = "000000A5-…"` → {"ServiceSignature": uuid} for Apple's types."""
    out = {}
    for const, uuid in re.findall(r'^\s+([A-Z0-9_]+) = "([0-9A-Fa-f-]{36})"', text, re.M):
        if uuid.upper().endswith(BASE):
            out["".join(p.capitalize() for p in const.split("_"))] = uuid.upper()
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    nodejs, aiohomekit = sys.argv[1], sys.argv[2]
    with open(os.path.join(CATALOG, "characteristics.json")) as f:
        known_chars = json.load(f)
    with open(os.path.join(CATALOG, "services.json")) as f:
        known_services = json.load(f)
    have_c = {v["UUID"].upper() for v in known_chars.values()}
    have_s = {v["UUID"].upper() for v in known_services.values()}

    chars = {}
    with open(os.path.join(nodejs, "CharacteristicDefinitions.ts")) as f:
        for name, spec in hap_nodejs_characteristics(f.read()).items():
            if spec["UUID"] not in have_c and spec["UUID"].endswith(BASE) and "Format" in spec:
                chars[name] = spec
    with open(os.path.join(aiohomekit, "characteristic_types.py")) as f:
        # Types only aiohomekit names: their data as HAP's spec gives it (paired read).
        for name, uuid in aiohomekit_names(f.read()).items():
            if uuid not in have_c and all(s["UUID"] != uuid for s in chars.values()):
                chars[name] = {"UUID": uuid, "Format": "data", "Permissions": ["pr"]}
    services = {}
    all_names = set(known_chars) | set(chars)
    with open(os.path.join(nodejs, "ServiceDefinitions.ts")) as f:
        for name, spec in hap_nodejs_services(f.read()).items():
            if spec["UUID"] not in have_s and spec["UUID"].endswith(BASE):
                spec["RequiredCharacteristics"] = [c for c in spec["RequiredCharacteristics"] if c in all_names]
                spec["OptionalCharacteristics"] = [c for c in spec["OptionalCharacteristics"] if c in all_names]
                services[name] = spec
    with open(os.path.join(aiohomekit, "service_types.py")) as f:
        for name, uuid in aiohomekit_names(f.read()).items():
            if uuid not in have_s and all(s["UUID"] != uuid for s in services.values()):
                services[name] = {"UUID": uuid, "RequiredCharacteristics": [], "OptionalCharacteristics": []}
    for file, table in (("more-characteristics.json", chars), ("more-services.json", services)):
        with open(os.path.join(CATALOG, file), "w") as f:
            json.dump(dict(sorted(table.items())), f, indent=2, sort_keys=True)
            f.write("\n")
    print(f"{len(chars)} characteristic types, {len(services)} service types")


if __name__ == "__main__":
    main()
