#!/usr/bin/env python3
"""A Homie v5 controller written from the convention (https://homieiot.github.io/specification/),
to check HomeMQTT's Homie output from the outside, with paho-mqtt as the client.

  homie_consumer.py --port P discover [--domain homie] [--wait-ready ROOT]
      Discovers every device on `+/5/+/$state`, reads descriptions and values, checks each
      against the convention and prints a JSON report: devices (state, description, values)
      and `violations` (one line per point broken).
  homie_consumer.py --port P set DEVICE/NODE/PROPERTY VALUE [--domain homie]
      Publishes VALUE to the property's `set` topic as a controller does (non-retained) and
      waits for the property to report it, or for the device's `$log/warn`; prints JSON.
"""
import argparse
import json
import re
import sys
import threading
import time

import paho.mqtt.client as mqtt

ID = re.compile(r"^[a-z0-9-]+$")
INTEGER = re.compile(r"^-?[0-9]+$")
FLOAT = re.compile(r"^-?[0-9]*\.?[0-9]*([eE][-+]?[0-9]+)?$")
DATATYPES = {"integer", "float", "boolean", "string", "enum", "color", "datetime", "duration", "json"}
STATES = {"init", "ready", "disconnected", "sleeping", "lost"}
RANGE = re.compile(r"^([^:]*):([^:]*)(:([^:]+))?$")


class Collector:
    def __init__(self, port, domain):
        self.domain = domain
        self.messages = {}  # topic -> (payload bytes, retain)
        self.logs = []
        self.lock = threading.Lock()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
        self.client.on_message = self.on_message
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def on_message(self, client, userdata, message):
        with self.lock:
            if "/$log/" in message.topic:
                self.logs.append((message.topic, message.payload.decode("utf-8", "replace")))
            elif message.payload == b"":
                self.messages.pop(message.topic, None)
            else:
                self.messages[message.topic] = (message.payload, message.retain)

    def subscribe(self, topic, qos=1):
        done = threading.Event()
        self.client.on_subscribe = lambda *args: done.set()
        self.client.subscribe(topic, qos)
        done.wait(5)

    def get(self, topic):
        with self.lock:
            found = self.messages.get(topic)
        return None if found is None else found[0]

    def topics(self, pattern):
        with self.lock:
            return [t for t in self.messages if pattern.match(t)]


def text(payload):
    """A Homie payload as a string: the single byte 0 is the empty string."""
    return "" if payload == b"\x00" else payload.decode("utf-8")


def check_value(value, prop, where, violations):
    datatype, fmt = prop.get("datatype"), prop.get("format")
    if datatype == "integer":
        if not INTEGER.match(value):
            violations.append(f"{where}: integer payload {value!r}")
        elif fmt:
            check_range(int(value), fmt, where, violations)
    elif datatype == "float":
        if not FLOAT.match(value) or value in ("", "-", "."):
            violations.append(f"{where}: float payload {value!r}")
        elif fmt:
            check_range(float(value), fmt, where, violations)
    elif datatype == "boolean":
        if value not in ("true", "false"):
            violations.append(f"{where}: boolean payload {value!r}")
    elif datatype == "enum":
        if value not in (fmt or "").split(","):
            violations.append(f"{where}: enum payload {value!r} not in {fmt!r}")


def check_range(number, fmt, where, violations):
    m = RANGE.match(fmt)
    low, high = m.group(1), m.group(2)
    if low and number < float(low) or high and number > float(high):
        violations.append(f"{where}: value {number} outside {fmt}")


def check_property(pid, prop, where, violations):
    if not ID.match(pid):
        violations.append(f"{where}: property id {pid!r}")
    datatype = prop.get("datatype")
    if datatype not in DATATYPES:
        violations.append(f"{where}: datatype {datatype!r}")
    for key in ("settable", "retained"):
        if key in prop and not isinstance(prop[key], bool):
            violations.append(f"{where}: {key} must be a boolean")
    fmt = prop.get("format")
    if datatype == "enum":
        values = (fmt or "").split(",")
        if not fmt or "" in values or len(set(values)) != len(values):
            violations.append(f"{where}: enum format {fmt!r} (required, no empty values, no duplicates)")
    elif datatype in ("integer", "float") and fmt is not None:
        m = RANGE.match(fmt)
        number = INTEGER if datatype == "integer" else FLOAT
        if not m or any(g and not number.match(g) for g in (m.group(1), m.group(2), m.group(4))):
            violations.append(f"{where}: {datatype} format {fmt!r}")
        elif m.group(4) and float(m.group(4)) <= 0:
            violations.append(f"{where}: step must be > 0 in {fmt!r}")
    elif datatype == "color" and not fmt:
        violations.append(f"{where}: color needs a format")
    if "unit" in prop and not isinstance(prop["unit"], str):
        violations.append(f"{where}: unit must be a string")


def discover(args):
    c = Collector(args.port, args.domain)
    # Auto-discovery, as the convention says: the `$state` of every device.
    c.subscribe("+/5/+/$state")
    c.subscribe(f"{args.domain}/5/+/$description")
    c.subscribe(f"{args.domain}/5/+/+/+")
    deadline = time.time() + args.timeout
    state_topic = re.compile(rf"^{re.escape(args.domain)}/5/[^/]+/\$state$")
    while time.time() < deadline:
        time.sleep(0.3)
        states = {t.split("/")[2]: text(c.get(t) or b"") for t in c.topics(state_topic)}
        if args.wait_ready and states.get(args.wait_ready) != "ready":
            continue
        root = json.loads(c.get(f"{args.domain}/5/{args.wait_ready}/$description") or b"{}") if args.wait_ready else {}
        children = root.get("children", [])
        if all(states.get(child) in ("ready", "lost") for child in children):
            time.sleep(0.5)  # the values behind the last `ready`
            break
    devices, violations = {}, []
    states = {t.split("/")[2]: text(c.get(t)) for t in c.topics(state_topic)}
    for device_id, state in sorted(states.items()):
        where = device_id
        if not ID.match(device_id):
            violations.append(f"{where}: device id")
        if state not in STATES:
            violations.append(f"{where}: $state {state!r}")
        raw = c.get(f"{args.domain}/5/{device_id}/$description")
        if raw is None:
            violations.append(f"{where}: no $description")
            continue
        try:
            description = json.loads(raw)
        except ValueError:
            violations.append(f"{where}: $description is not JSON")
            continue
        if not re.match(r"^5\.[0-9]+$", str(description.get("homie"))):
            violations.append(f"{where}: homie {description.get('homie')!r}")
        if not isinstance(description.get("version"), int):
            violations.append(f"{where}: version must be an integer")
        values = {}
        for nid, node in description.get("nodes", {}).items():
            if not ID.match(nid):
                violations.append(f"{where}: node id {nid!r}")
            for pid, prop in node.get("properties", {}).items():
                pwhere = f"{where}/{nid}/{pid}"
                check_property(pid, prop, pwhere, violations)
                payload = c.get(f"{args.domain}/5/{device_id}/{nid}/{pid}")
                if payload is not None and prop.get("retained", True):
                    value = text(payload)
                    values[f"{nid}/{pid}"] = value
                    if state == "ready":
                        check_value(value, prop, pwhere, violations)
        devices[device_id] = {"state": state, "description": description, "values": values}
    # The parent-child tree: every child a root names exists and names that root back.
    for device_id, device in devices.items():
        d = device["description"]
        if "root" in d:
            if d["root"] not in devices:
                violations.append(f"{device_id}: root {d['root']!r} is not a device")
            elif device_id not in devices[d["root"]]["description"].get("children", []):
                violations.append(f"{device_id}: not among its root's children")
        for child in d.get("children", []):
            if child not in devices:
                violations.append(f"{device_id}: child {child!r} has no $state")
            elif devices[child]["description"].get("root") != device_id and "parent" not in devices[child]["description"]:
                violations.append(f"{child}: root must be {device_id!r}")
    c.client.loop_stop()
    json.dump({"devices": devices, "violations": violations}, sys.stdout)


def set_value(args):
    c = Collector(args.port, args.domain)
    device_id, node_id, prop_id = args.property.split("/")
    base = f"{args.domain}/5/{device_id}"
    c.subscribe(f"{base}/$description")
    c.subscribe(f"{base}/{node_id}/{prop_id}")
    c.subscribe(f"{base}/$log/#")
    time.sleep(0.3)
    before = c.get(f"{base}/{node_id}/{prop_id}")
    # A controller's command: non-retained, QoS 1 for a retained property.
    c.client.publish(f"{base}/{node_id}/{prop_id}/set", args.value.encode() or b"\x00", qos=1, retain=False)
    deadline = time.time() + args.timeout
    outcome = {"before": before and text(before)}
    while time.time() < deadline:
        time.sleep(0.05)
        value = c.get(f"{base}/{node_id}/{prop_id}")
        if value is not None and text(value) == args.value:
            outcome["value"] = text(value)
            break
        if c.logs:
            break
    outcome["logs"] = [payload for _, payload in c.logs]
    outcome.setdefault("value", text(c.get(f"{base}/{node_id}/{prop_id}") or b"\x00"))
    c.client.loop_stop()
    json.dump(outcome, sys.stdout)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--domain", default="homie")
    parser.add_argument("--timeout", type=float, default=15)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("discover")
    d.add_argument("--wait-ready")
    s = sub.add_parser("set")
    s.add_argument("property")
    s.add_argument("value")
    args = parser.parse_args()
    discover(args) if args.command == "discover" else set_value(args)


if __name__ == "__main__":
    main()
