"""Home Assistant across homes and sites, as Scripts/test-homeassistant.sh runs it (issue 43).

The steps beside Scripts/homeassistant-drive.py's (copied next to it as drive.py, whose helpers
these use), each a subcommand, run with Home Assistant's own Python:
  registry  write {unique id: entity id} of every MQTT entity Home Assistant has (--out)
  moved     after an accessory moved to another home (another base topic): the components of the
            devices --node names keep the entity ids --registry recorded, Home Assistant gained
            no entity but a new home's gateway device, and each of them is available and follows every command it offers
            (which it can only do through the new home's topics: the old ones are cleared)
  states    write the state of every controllable entity of the configs in --discovery (--out)
  sites     a second gateway on the same broker (its configs in --site-discovery, the first's in
            --discovery): no unique id of one is the other's, Home Assistant has both sets, every
            device of the second is named and placed with --site-name before its own name and
            area, and no device name of the second is one of the first's
  unchanged the first site's controllable entities are as `states` recorded them (--states-file),
            after the second site's were driven: commands on one site never reach the other
  diagnostic the gateway's sensors and the accessories' last seen are diagnostic entities, the
            last-seen ones disabled by default, the gateway's enabled ones with a state (issue 44;
            "Last error" is unknown while there is none)
"""

import argparse
import asyncio
import json
import sys
import time

import aiohttp

from drive import Driver, component_ids, configs, expected_unique_ids, mqtt_entities, unavailable, ws_call

# Domains whose state changes only by a command (the simulator moves nothing of these by itself).
CONTROLLED = ("light", "switch", "lock", "fan", "climate")


def device_ids(config):
    device = config.get("dev") or config.get("device") or {}
    return device.get("ids") or device.get("identifiers") or []


def gateway_device(unique_id):
    """A component of a home's gateway device (`homemqtt__gateway_…` on the default base,
    `homemqtt_<base>___gateway_…` on another): a new home brings one, which no accessory's id can be."""
    return unique_id.startswith("homemqtt__gateway_") or "___gateway_" in unique_id


async def registry(args):
    token = open(args.token_file).read()
    async with aiohttp.ClientSession() as http:
        entries = await mqtt_entities(http, args, token)
    with open(args.out, "w") as f:
        json.dump({e["unique_id"]: e["entity_id"] for e in entries}, f)
    print(f"registry: {len(entries)} MQTT entities recorded")


async def moved(args):
    token = open(args.token_file).read()
    before = json.load(open(args.registry))
    nodes = set(args.node)
    uids = set().union(*(component_ids(c) for c in configs(args.discovery) if nodes & set(device_ids(c))))
    if not uids:
        sys.exit(f"moved: no component of {sorted(nodes)} in the discovery configs")
    async with aiohttp.ClientSession() as http:
        driver = Driver(http, args, token)
        deadline = time.monotonic() + args.timeout
        while True:
            entries = await mqtt_entities(http, args, token)
            have = {e["unique_id"]: e for e in entries}
            renamed = {u: (before.get(u), have[u]["entity_id"]) for u in uids
                       if u in have and have[u]["entity_id"] != before.get(u)}
            missing = sorted(uids - have.keys())
            new = sorted(u for u in set(have) - set(before) if not gateway_device(u))
            ours = [have[u]["entity_id"] for u in sorted(uids) if u in have and not have[u].get("disabled_by")]
            down = await unavailable(driver, ours)
            if renamed or new:  # neither heals with time: a new id is a new entity for good
                sys.exit(f"moved: {args.label}: entity ids changed {renamed}, new entities {new[:10]}")
            if not missing and not down:
                break
            if time.monotonic() > deadline:
                sys.exit(f"moved: {args.label}: missing {missing[:10]}, unavailable {down[:10]}")
            await asyncio.sleep(0.5)
        for entity_id in ours:
            await driver.drive(entity_id)
    failures = [r for r in driver.rows if not r[3]]
    commands = [r for r in driver.rows if r[1] != "(read)"]
    for entity, label, accepted, _, detail in failures:
        print(f"FAIL {entity}: {label}: {'accepted, state did not follow' if accepted else 'refused'}: {detail}")
    print(f"moved: {args.label}: {len(uids)} components kept their entity ids, no new entity; "
          f"{len(commands) - len(failures)} of {len(commands)} commands on its {len(ours)} entities followed")
    sys.exit(1 if failures or not commands else 0)


async def controllable(http, args, token, discovery_file):
    ours = expected_unique_ids(discovery_file)
    driver = Driver(http, args, token)
    out = {}
    for e in await mqtt_entities(http, args, token):
        if e["unique_id"] in ours and e["entity_id"].split(".")[0] in CONTROLLED and not e.get("disabled_by"):
            s = await driver.state(e["entity_id"])
            out[e["entity_id"]] = s and s["state"]
    return out


async def states(args):
    token = open(args.token_file).read()
    async with aiohttp.ClientSession() as http:
        found = await controllable(http, args, token, args.discovery)
    with open(args.out, "w") as f:
        json.dump(found, f)
    print(f"states: {len(found)} controllable entities recorded")


async def unchanged(args):
    token = open(args.token_file).read()
    before = json.load(open(args.states_file))
    async with aiohttp.ClientSession() as http:
        now = await controllable(http, args, token, args.discovery)
    changed = {e: (s, now.get(e)) for e, s in before.items() if now.get(e) != s}
    if changed or not before:
        sys.exit(f"unchanged: {len(changed)} of the first site's {len(before)} entities changed: {changed}")
    print(f"unchanged: the first site's {len(before)} controllable entities kept their states")


async def sites(args):
    token = open(args.token_file).read()
    first, second = configs(args.discovery), configs(args.site_discovery)
    a_ids, b_ids = set().union(*map(component_ids, first)), set().union(*map(component_ids, second))
    shared = a_ids & b_ids
    if shared or not b_ids:
        sys.exit(f"sites: {len(b_ids)} components on the second site; unique ids of both: {sorted(shared)[:10]}")
    b_nodes = {i for c in second for i in device_ids(c)}
    a_nodes = {i for c in first for i in device_ids(c)}
    async with aiohttp.ClientSession() as http:
        deadline = time.monotonic() + args.timeout
        while True:
            have = {e["unique_id"] for e in await mqtt_entities(http, args, token)}
            missing = (a_ids | b_ids) - have
            if not missing:
                break
            if time.monotonic() > deadline:
                sys.exit(f"sites: {len(missing)} components not in Home Assistant: {sorted(missing)[:10]}")
            await asyncio.sleep(0.5)
        devices = await ws_call(http, args.url, token, {"type": "config/device_registry/list"})
        areas = {a["area_id"]: a["name"] for a in await ws_call(http, args.url, token,
                                                                {"type": "config/area_registry/list"})}

    def node(d):
        return next((i for domain, i in d["identifiers"] if domain == "mqtt"), None)

    a_devices = [d for d in devices if node(d) in a_nodes]
    b_devices = [d for d in devices if node(d) in b_nodes]
    problems = []
    if len(b_devices) != len(b_nodes):
        problems.append(f"{len(b_devices)} devices in Home Assistant for the second site's {len(b_nodes)}")
    prefix = args.site_name + " "
    # An accessory's device: the site's name first; the gateway's own: "HomeMQTT <site> <base>".
    problems += [f"device {d['name']!r} has no {args.site_name!r} before its name"
                 for d in b_devices if not (d["name"] or "").startswith(prefix)
                 and not (gateway_device(node(d) + "_") and f"HomeMQTT {prefix}" in d["name"] + " ")]
    problems += [f"device {d['name']!r}: area {areas.get(d['area_id'])!r} without {args.site_name!r}"
                 for d in b_devices if d["area_id"] and not areas.get(d["area_id"], "").startswith(args.site_name)]
    a_names = {d["name"] for d in a_devices}
    problems += [f"device name {d['name']!r} on both sites" for d in b_devices if d["name"] in a_names]
    for p in problems:
        print(f"FAIL {p}")
    placed = sum(1 for d in b_devices if d["area_id"])
    print(f"sites: {len(a_ids)} and {len(b_ids)} components, no unique id on both, all in Home Assistant; "
          f"the second site's {len(b_devices)} devices named '{prefix}…' ({placed} in '{args.site_name} …' areas), "
          f"none named as one of the first's {len(a_devices)}")
    sys.exit(1 if problems else 0)


async def diagnostic(args):
    """Issue 44: the gateway's own sensors and every accessory's last seen are diagnostic entities
    in Home Assistant's registry, the last-seen ones disabled until a person enables them (as the
    configs ask), and the gateway's enabled ones have a state."""
    token = open(args.token_file).read()
    wanted = {}  # unique id: enabled by default
    for config in configs(args.discovery):
        components = config.get("cmps") or config.get("components") or {}
        for c in components.values():
            if c.get("entity_category") == "diagnostic":
                wanted[c.get("unique_id")] = c.get("enabled_by_default", True)
    gateway = [u for u in wanted if gateway_device(u)]
    last_seen = [u for u in wanted if u.endswith("_last_seen")]
    if not gateway or not last_seen:
        sys.exit(f"diagnostic: the configs have {len(gateway)} gateway and {len(last_seen)} last-seen entities")
    async with aiohttp.ClientSession() as http:
        entries = {e["unique_id"]: e for e in await mqtt_entities(http, args, token)}
        driver = Driver(http, args, token)
        problems = []
        for uid, enabled in sorted(wanted.items()):
            e = entries.get(uid)
            if e is None:
                problems.append(f"{uid}: not in Home Assistant")
                continue
            if e.get("entity_category") != "diagnostic":
                problems.append(f"{e['entity_id']}: category {e.get('entity_category')!r}, not diagnostic")
            if enabled != (e.get("disabled_by") is None):
                problems.append(f"{e['entity_id']}: disabled_by {e.get('disabled_by')!r}, enabled by default {enabled}")
            if enabled:
                state = ((await driver.state(e["entity_id"])) or {}).get("state")
                # Unknown is a state for "Last error" (while the gateway has none), for no other.
                if state in (None, "unavailable") or (state == "unknown" and not uid.endswith("_last_error")):
                    problems.append(f"{e['entity_id']}: state {state!r}")
    for p in problems:
        print(f"FAIL {p}")
    print(f"diagnostic: {len(gateway)} gateway entities and {len(last_seen)} last-seen ones, all diagnostic in "
          f"Home Assistant; the last-seen ones disabled, the gateway's enabled ones with a state")
    sys.exit(1 if problems else 0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("step", choices=["registry", "moved", "states", "sites", "unchanged", "diagnostic"])
    p.add_argument("--url", default="http://127.0.0.1:8123")
    p.add_argument("--token-file", required=True)
    p.add_argument("--discovery")
    p.add_argument("--site-discovery")
    p.add_argument("--site-name")
    p.add_argument("--registry")
    p.add_argument("--node", action="append")
    p.add_argument("--label", default="")
    p.add_argument("--out")
    p.add_argument("--states-file")
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--follow", type=float, default=30)
    args = p.parse_args()
    steps = {"registry": registry, "moved": moved, "states": states, "sites": sites, "unchanged": unchanged,
             "diagnostic": diagnostic}
    asyncio.run(steps[args.step](args))


if __name__ == "__main__":
    main()
