#!/usr/bin/env python3
"""Generates Sources/HomeModel/Catalog+Generated.swift from HAP-python's type catalog.

Usage (from anywhere): python3 Scripts/generate-catalog.py [--catalog DIR] [--output FILE] [--check]

Reads <repo>/Tests/Fixtures/hap-catalog/{characteristics,services}.json by default. Names follow the
HomeKit framework (HMCharacteristicType*/HMServiceType* constants, kebab-cased) where Apple has a
constant; otherwise they are the kebab-case of the HAP-python name. The kebab-case of the HAP-python
name is kept as an alias wherever it differs, so both spellings resolve. `--check` fails if the
committed file is not what the script would write now (for CI).
"""
import argparse
import json
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CATALOG = os.path.join(REPO, "Tests", "Fixtures", "hap-catalog")
DEFAULT_OUTPUT = os.path.join(REPO, "Sources", "HomeModel", "Catalog+Generated.swift")
BASE_SUFFIX = "-0000-1000-8000-0026BB765291"
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

# HAP-python name -> kebab-case of Apple's HMCharacteristicType* constant, where it differs from
# the kebab-case of the HAP-python name.
CHARACTERISTIC_NAMES = {
    "On": "power-state",
    "TemperatureDisplayUnits": "temperature-units",
    "CurrentHeatingCoolingState": "current-heating-cooling",
    "TargetHeatingCoolingState": "target-heating-cooling",
    "CoolingThresholdTemperature": "cooling-threshold",
    "HeatingThresholdTemperature": "heating-threshold",
    "FirmwareRevision": "firmware-version",
    "HardwareRevision": "hardware-version",
    "AdministratorOnlyAccess": "admin-only-access",
    "LockCurrentState": "current-lock-mechanism-state",
    "LockTargetState": "target-lock-mechanism-state",
    "LockLastKnownAction": "lock-mechanism-last-known-action",
    "LockControlPoint": "lock-management-control-point",
    "LockManagementAutoSecurityTimeout": "lock-management-auto-secure-timeout",
    "ContactSensorState": "contact-state",
    "SecuritySystemCurrentState": "current-security-system-state",
    "SecuritySystemTargetState": "target-security-system-state",
    "CurrentHorizontalTiltAngle": "current-horizontal-tilt",
    "CurrentVerticalTiltAngle": "current-vertical-tilt",
    "TargetHorizontalTiltAngle": "target-horizontal-tilt",
    "TargetVerticalTiltAngle": "target-vertical-tilt",
    "CurrentTiltAngle": "current-tilt",
    "TargetTiltAngle": "target-tilt",
    "CurrentAmbientLightLevel": "current-light-level",
    "ProgrammableSwitchEvent": "input-event",
    "SetupEndpoints": "setup-stream-endpoint",
    "SelectedRTPStreamConfiguration": "selected-stream-configuration",
    "ResetFilterIndication": "filter-reset-change-indication",
    "VOCDensity": "volatile-organic-compound-density",
    "PM2.5Density": "pm2-5-density",
    "RelativeHumidityDehumidifierThreshold": "dehumidifier-threshold",
    "RelativeHumidityHumidifierThreshold": "humidifier-threshold",
    "ServiceLabelNamespace": "label-namespace",
    "ServiceLabelIndex": "label-index",
}

# HAP-python name -> kebab-case of Apple's HMServiceType* constant, where it differs.
SERVICE_NAMES = {
    "BatteryService": "battery",
    "Fanv2": "ventilation-fan",
    "Slat": "slats",
    "ServiceLabel": "label",
}

# Services that HAP defines with another service's UUID (told apart only by their characteristics).
SHARED_SERVICE_UUIDS = {"TelevisionSpeaker": "Speaker"}

# Valid-value names that HAP-python runs together or spells with symbols.
VALUE_NAMES = {
    "AirParticulateSize": {"2.5\u03bcm": "size-2-5", "10\u03bcm": "size-10"},
    "InputSourceType": {"AirPlay": "airplay"},
    "InUse": {"Inuse": "in-use", "Notinuse": "not-in-use"},
    "LockLastKnownAction": {
        "SecuredbyKeypad": "secured-by-keypad",
        "UnsecuredbyKeypad": "unsecured-by-keypad",
        "SecuredbyAutoSecureTimeout": "secured-by-auto-secure-timeout",
    },
    "ProgramMode": {
        "Noprogramscheduled": "no-program-scheduled",
        "Programscheduled": "program-scheduled",
        "Programscheduled(ManualMode)": "program-scheduled-manual-mode",
    },
    "TargetHumidifierDehumidifierState": {"HumidifierorDehumidifier": "humidifier-or-dehumidifier"},
    "ValveType": {"Genericvalve": "generic-valve", "Showerhead": "shower-head", "Waterfaucet": "water-faucet"},
}

# HAP accessory categories (HAP-python's and HAP-NodeJS's Categories), HomeKit-style names.
CATEGORIES = {
    1: "other", 2: "bridge", 3: "fan", 4: "garage-door-opener", 5: "lightbulb", 6: "door-lock",
    7: "outlet", 8: "switch", 9: "thermostat", 10: "sensor", 11: "security-system", 12: "door",
    13: "window", 14: "window-covering", 15: "programmable-switch", 16: "range-extender",
    17: "ip-camera", 18: "video-doorbell", 19: "air-purifier", 20: "heater", 21: "air-conditioner",
    22: "humidifier", 23: "dehumidifier", 24: "apple-tv", 25: "homepod", 26: "speaker",
    27: "airport", 28: "sprinkler", 29: "faucet", 30: "shower-head", 31: "television",
    32: "target-controller", 33: "wifi-router",
}
# Other spellings people will type (HAP-python / HAP-NodeJS constant names, HomeKit's names).
CATEGORY_ALIASES = {
    "alarm-system": 11, "camera": 17, "video-door-bell": 18, "air-heater": 20,
    "air-humidifier": 22, "air-dehumidifier": 23, "router": 33, "remote": 32,
}


def kebab(name):
    s = name.replace("\u03bc", "u")
    s = re.sub(r"[^A-Za-z0-9]+", "-", s)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1-\2", s)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", s)
    return s.strip("-").lower()


def short_uuid(uuid):
    u = uuid.upper()
    if not u.endswith(BASE_SUFFIX) or len(u) != 36:
        sys.exit(f"not an Apple-defined UUID: {uuid}")
    return u[:8].lstrip("0") or "0"


def swift_string(s):
    return json.dumps(s, ensure_ascii=False)


def swift_number(x):
    if isinstance(x, bool):
        sys.exit(f"unexpected bool as number: {x}")
    if isinstance(x, int) or float(x).is_integer():
        return str(int(x))
    return repr(float(x))


def check_unique(kind, keys_by_owner):
    seen = {}
    for owner, keys in keys_by_owner:
        for key in keys:
            other = seen.setdefault(key, owner)
            if other != owner:
                sys.exit(f"{kind} lookup key '{key}' is used by both {other} and {owner}")


def build(catalog_dir):
    with open(os.path.join(catalog_dir, "characteristics.json"), encoding="utf-8") as f:
        chars = json.load(f)
    with open(os.path.join(catalog_dir, "services.json"), encoding="utf-8") as f:
        services = json.load(f)
    # The types HAP-python lacks, from HAP-NodeJS and aiohomekit (Scripts/extract-more-types.py).
    for name, table in (("more-characteristics.json", chars), ("more-services.json", services)):
        path = os.path.join(catalog_dir, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for key, spec in json.load(f).items():
                    if key in table:
                        sys.exit(f"{name}: {key} is already in HAP-python's catalog")
                    table[key] = spec

    for table, source, kind in ((CHARACTERISTIC_NAMES, chars, "characteristic"), (SERVICE_NAMES, services, "service"),
                                (VALUE_NAMES, chars, "characteristic")):
        for key in table:
            if key not in source:
                sys.exit(f"override for unknown {kind} '{key}'")

    lines = []
    out = lines.append
    out("// swift-format-ignore-file")
    out("// Generated by Scripts/generate-catalog.py from HAP-python's catalog and the types HAP-NodeJS and")
    out("// aiohomekit add (Tests/Fixtures/hap-catalog, Apache-2.0). Do not edit: change the script and run")
    out("// it again. The script lays the table out,")
    out("// one type per line, so swift-format leaves the file alone.")
    out("")
    out("extension Catalog {")
    out("    static let generatedCharacteristicTypes: [CharacteristicType] = [")
    char_keys, aliases, hap_to_short = [], {}, {}
    for hap, spec in chars.items():
        short = short_uuid(spec["UUID"])
        hap_to_short[hap] = short
        name = CHARACTERISTIC_NAMES.get(hap, kebab(hap))
        alias = kebab(hap)
        for n in (name, alias):
            if not KEBAB.match(n):
                sys.exit(f"bad name '{n}' for {hap}")
        if alias != name:
            aliases[alias] = short
        char_keys.append((hap, {name, alias, hap.lower()}))
        args = [swift_string(short), swift_string(name), swift_string(hap), "." + spec["Format"],
                swift_string(" ".join(spec["Permissions"]))]
        if "unit" in spec:
            args.append("unit: " + swift_string(spec["unit"]))
        if "minValue" in spec:
            args.append("min: " + swift_number(spec["minValue"]))
        if "maxValue" in spec:
            args.append("max: " + swift_number(spec["maxValue"]))
        step = spec.get("minStep", spec.get("stepValue"))
        if step is not None:
            args.append("step: " + swift_number(step))
        if "ValidValues" in spec:
            overrides = VALUE_NAMES.get(hap, {})
            for key in overrides:
                if key not in spec["ValidValues"]:
                    sys.exit(f"value override for unknown value '{key}' of {hap}")
            pairs = sorted((int(v), overrides.get(k, kebab(k))) for k, v in spec["ValidValues"].items())
            names = [n for _, n in pairs]
            if len(set(names)) != len(names) or len({v for v, _ in pairs}) != len(pairs):
                sys.exit(f"valid values of {hap} are not unique: {pairs}")
            for n in names:
                if not KEBAB.match(n):
                    sys.exit(f"bad value name '{n}' for {hap}")
            args.append("values: [" + ", ".join(f"{v}: {swift_string(n)}" for v, n in pairs) + "]")
        if "MaximumLength" in spec:
            args.append("maxLength: " + str(int(spec["MaximumLength"])))
        out("        c(" + ", ".join(args) + "),")
    out("    ]")
    check_unique("characteristic", char_keys)
    check_unique("characteristic UUID", [(h, {u}) for h, u in hap_to_short.items()])

    out("")
    out("    static let generatedServiceTypes: [ServiceType] = [")
    service_keys, service_aliases = [], {}
    for hap, spec in services.items():
        short = short_uuid(spec["UUID"])
        name = SERVICE_NAMES.get(hap, kebab(hap))
        alias = kebab(hap)
        for n in (name, alias):
            if not KEBAB.match(n):
                sys.exit(f"bad name '{n}' for {hap}")
        if alias != name:
            service_aliases[alias] = short
        service_keys.append((hap, {name, alias, hap.lower()}))
        def refs(key):
            missing = [c for c in spec.get(key, []) if c not in hap_to_short]
            if missing:
                sys.exit(f"service {hap} refers to unknown characteristics {missing}")
            return "[" + ", ".join(swift_string(hap_to_short[c]) for c in spec.get(key, [])) + "]"
        out(f"        s({swift_string(short)}, {swift_string(name)}, {swift_string(hap)}, "
            f"required: {refs('RequiredCharacteristics')}, optional: {refs('OptionalCharacteristics')}),")
    out("    ]")
    check_unique("service", service_keys)
    # HAP gives the television speaker the plain speaker's UUID; a UUID lookup finds `speaker`.
    check_unique("service UUID", [(SHARED_SERVICE_UUIDS.get(h, h), {short_uuid(spec["UUID"])})
                                  for h, spec in services.items()])

    def dictionary(title, mapping, key_fmt, value_fmt):
        out("")
        out(f"    static let {title} = [")
        for k in sorted(mapping):
            out(f"        {key_fmt(k)}: {value_fmt(mapping[k])},")
        out("    ]")

    dictionary("generatedCharacteristicAliases", aliases, swift_string, swift_string)
    dictionary("generatedServiceAliases", service_aliases, swift_string, swift_string)
    if len(set(CATEGORIES.values())) != len(CATEGORIES) or set(CATEGORY_ALIASES) & set(CATEGORIES.values()):
        sys.exit("category names are not unique")
    dictionary("generatedCategories", CATEGORIES, str, swift_string)
    dictionary("generatedCategoryAliases", CATEGORY_ALIASES, swift_string, str)
    out("}")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", default=DEFAULT_CATALOG)
    parser.add_argument("--output", default=DEFAULT_OUTPUT)
    parser.add_argument("--check", action="store_true", help="fail if the output file is out of date")
    args = parser.parse_args()
    text = build(args.catalog)
    if args.check:
        try:
            with open(args.output, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != text:
            sys.exit(f"{args.output} is out of date: run Scripts/generate-catalog.py")
        return
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
