"""Drives a real Home Assistant against the gateway, as Scripts/test-homeassistant.sh runs it.

Runs with Home Assistant's own Python (its venv has aiohttp). Steps, each a subcommand:
  setup   onboard a fresh Home Assistant headlessly (owner user, auth code, token) and add the
          MQTT integration by its config flow; writes the token to --token-file
  wait    wait until every component the gateway's retained discovery configs name (read from
          --discovery, one JSON payload a line) is in Home Assistant's entity registry
  drive   call what Home Assistant offers for each of the gateway's enabled entities (those of
          --discovery), check that its state follows, print a table and the failures; exit 1 on
          any failure
  avail   wait until every entity that was available before (--states-file) is available again

Why the state is waited for: a command goes HA → broker → gateway → accessory → gateway → broker
→ HA; the state follows in well under a second here, or after a device's travel time (the garage
door: 12 s), so --follow (30 s) only bounds a failure; a state that follows ends the wait.
"""

import argparse
import asyncio
import json
import sys
import time

import aiohttp

CLIENT_ID = "http://127.0.0.1/"


async def setup(args):
    async with aiohttp.ClientSession() as http:
        base = args.url
        deadline = time.monotonic() + 300
        while True:  # Home Assistant answers once its http server is up (first start: ~30 s)
            try:
                async with http.get(f"{base}/api/onboarding") as r:
                    if r.status == 200:
                        break
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline:
                sys.exit("setup: Home Assistant's http server did not answer in 300 s")
            await asyncio.sleep(1)
        user = {"client_id": CLIENT_ID, "name": "Test", "username": "test", "password": "test-pass-1", "language": "en"}
        async with http.post(f"{base}/api/onboarding/users", json=user) as r:
            body = await r.json()
            if r.status != 200:
                sys.exit(f"setup: onboarding user: {r.status} {body}")
        form = {"grant_type": "authorization_code", "code": body["auth_code"], "client_id": CLIENT_ID}
        async with http.post(f"{base}/auth/token", data=form) as r:
            token = (await r.json())["access_token"]
        headers = {"Authorization": f"Bearer {token}"}
        # The rest of onboarding, so that Home Assistant runs as a user's would after the wizard.
        # (Not core_config: it starts the met, radio_browser and google_translate flows, whose
        # requirements this root does not have and which have nothing to do with MQTT.)
        for step, data in (("analytics", {}), ("integration", {"client_id": CLIENT_ID, "redirect_uri": CLIENT_ID})):
            async with http.post(f"{base}/api/onboarding/{step}", json=data, headers=headers) as r:
                if r.status != 200:
                    print(f"setup: onboarding {step}: {r.status} {await r.text()}", file=sys.stderr)
        flow_url = f"{base}/api/config/config_entries/flow"
        async with http.post(flow_url, json={"handler": "mqtt"}, headers=headers) as r:
            flow = await r.json()
        for _ in range(3):  # the broker step (a first "user" menu is possible on some versions)
            if flow.get("type") == "create_entry":
                break
            if flow.get("type") == "menu":
                data = {"next_step_id": "broker"}
            else:
                data = {"broker": "127.0.0.1", "port": args.broker_port}
            async with http.post(f"{flow_url}/{flow['flow_id']}", json=data, headers=headers) as r:
                flow = await r.json()
        if flow.get("type") != "create_entry":
            sys.exit(f"setup: MQTT config flow did not create an entry: {flow}")
        with open(args.token_file, "w") as f:
            f.write(token)
        print("setup: onboarded; MQTT integration added")


async def ws_call(http, url, token, message):
    async with http.ws_connect(url.replace("http", "ws", 1) + "/api/websocket") as ws:
        await ws.receive_json()
        await ws.send_json({"type": "auth", "access_token": token})
        if (await ws.receive_json())["type"] != "auth_ok":
            sys.exit("websocket auth failed")
        await ws.send_json({"id": 1, **message})
        reply = await ws.receive_json()
        if not reply.get("success"):
            sys.exit(f"websocket {message}: {reply}")
        return reply["result"]


def configs(discovery_file):
    """The retained discovery configs of a file, one JSON payload a line."""
    with open(discovery_file) as f:
        return [json.loads(line) for line in f if line.strip()]


def component_ids(config):
    """The unique ids of a config's components (device-based `cmps`, or a single component's own)."""
    components = config.get("cmps") or config.get("components")
    return {c.get("uniq_id") or c.get("unique_id") for c in (components.values() if components else [config])} - {None}


def expected_unique_ids(discovery_file):
    """The unique ids of every component the retained discovery configs name."""
    return set().union(*map(component_ids, configs(discovery_file)))


async def unavailable(driver, entity_ids):
    """Those of the entities Home Assistant has no state for, or shows unavailable."""
    return [e for e in entity_ids if ((await driver.state(e)) or {}).get("state") in (None, "unavailable")]


async def mqtt_entities(http, args, token):
    entries = await ws_call(http, args.url, token, {"type": "config/entity_registry/list"})
    return [e for e in entries if e["platform"] == "mqtt"]


async def wait(args):
    token = open(args.token_file).read()
    expected = expected_unique_ids(args.discovery)
    if not expected:
        sys.exit("wait: the gateway published no discovery config")
    async with aiohttp.ClientSession() as http:
        deadline = time.monotonic() + args.timeout
        while True:
            have = {e["unique_id"] for e in await mqtt_entities(http, args, token)}
            missing = expected - have
            if not missing:
                break
            if time.monotonic() > deadline:
                sys.exit(f"wait: {len(missing)} of {len(expected)} discovered components not in Home Assistant "
                         f"after {args.timeout} s: {sorted(missing)[:20]}")
            await asyncio.sleep(0.5)
        # An entity is registered when its config is read; its state comes with the retained state
        # and availability topics after that. Those that stay unavailable, drive reports.
        enabled = [e["entity_id"] for e in await mqtt_entities(http, args, token) if not e.get("disabled_by")]
        driver = Driver(http, args, token)
        while True:
            down = await unavailable(driver, enabled)
            if not down or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
    print(f"wait: all {len(expected)} discovered components are Home Assistant entities; "
          f"{len(enabled) - len(down)} of {len(enabled)} enabled ones available")


class Driver:
    def __init__(self, http, args, token):
        self.http, self.args = http, args
        self.headers = {"Authorization": f"Bearer {token}"}
        self.rows = []  # (entity, command, accepted, followed, detail)

    async def state(self, entity_id):
        async with self.http.get(f"{self.args.url}/api/states/{entity_id}", headers=self.headers) as r:
            return await r.json() if r.status == 200 else None

    async def command(self, entity_id, domain, service, data, check, what):
        """Calls domain.service on the entity; then waits until check(state) holds."""
        label = f"{service} {json.dumps(data)}" if data else service
        body = {"entity_id": entity_id, **data}
        async with self.http.post(f"{self.args.url}/api/services/{domain}/{service}", json=body,
                                  headers=self.headers) as r:
            accepted = r.status == 200
            answer = "" if accepted else f"HTTP {r.status}: {(await r.text())[:200]}"
        if not accepted:
            self.rows.append((entity_id, label, False, False, answer))
            return
        deadline = time.monotonic() + self.args.follow
        while True:
            s = await self.state(entity_id)
            if s and check(s):
                self.rows.append((entity_id, label, True, True, ""))
                return
            if time.monotonic() > deadline:
                shown = {k: s["attributes"].get(k) for k in what} if s and what else {}
                self.rows.append((entity_id, label, True, False,
                                  f"state {s and s['state']!r} {json.dumps(shown) if shown else ''}".strip()))
                return
            await asyncio.sleep(0.2)

    async def drive(self, entity_id):
        s = await self.state(entity_id)
        if s is None or s["state"] == "unavailable":
            self.rows.append((entity_id, "(read)", False, False, f"state {s and s['state']!r}"))
            return
        domain = entity_id.split(".")[0]
        handler = getattr(self, f"drive_{domain}", None)
        if handler is None:  # sensors, binary sensors, events: read, not commanded
            self.rows.append((entity_id, "(read)", True, True, ""))
            return
        await handler(entity_id, s["attributes"])

    # Each domain: what Home Assistant's UI offers for it, as service calls.

    async def on_off(self, e, domain):
        await self.command(e, domain, "turn_off", {}, lambda s: s["state"] == "off", [])
        await self.command(e, domain, "turn_on", {}, lambda s: s["state"] == "on", [])

    async def drive_switch(self, e, a):
        await self.on_off(e, "switch")

    async def drive_light(self, e, a):
        await self.on_off(e, "light")
        modes = set(a.get("supported_color_modes") or [])
        if modes - {"onoff"}:
            # 1 % after 50 %: a light whose minimum is above 1 % (Kitchen Spots: 10) is held there by the
            # command template, so 1 % shows as that minimum; accepted up to 10 %, below the 50 % before.
            for pct in (50, 1, 100):
                want = round(pct * 255 / 100)
                tolerance = 23 if pct == 1 else 3
                await self.command(e, "light", "turn_on", {"brightness_pct": pct},
                                   lambda s, w=want, t=tolerance: 0 <= (s["attributes"].get("brightness") or -99) - w
                                   <= t if t > 3 else abs((s["attributes"].get("brightness") or -99) - w) <= t,
                                   ["brightness"])
        if "color_temp" in modes:
            lo, hi = a.get("min_color_temp_kelvin"), a.get("max_color_temp_kelvin")
            for k in (lo, hi, min(max(3000, lo), hi)):
                await self.command(e, "light", "turn_on", {"color_temp_kelvin": k},
                                   lambda s, k=k: abs((s["attributes"].get("color_temp_kelvin") or 0) - k) <= k * 0.02,
                                   ["color_mode", "color_temp_kelvin"])
        if "hs" in modes:
            for hs in ((0, 100), (120, 50), (240, 100)):
                await self.command(e, "light", "turn_on", {"hs_color": list(hs)},
                                   lambda s, hs=hs: close_hs(s["attributes"].get("hs_color"), hs),
                                   ["color_mode", "hs_color"])

    async def drive_lock(self, e, a):
        await self.command(e, "lock", "unlock", {}, lambda s: s["state"] == "unlocked", [])
        await self.command(e, "lock", "lock", {}, lambda s: s["state"] == "locked", [])

    async def drive_cover(self, e, a):
        features = a.get("supported_features", 0)
        await self.command(e, "cover", "open_cover", {}, lambda s: s["state"] == "open", ["current_position"])
        if features & 4:  # SET_POSITION
            await self.command(e, "cover", "set_cover_position", {"position": 50},
                               lambda s: s["attributes"].get("current_position") == 50, ["current_position"])
        await self.command(e, "cover", "close_cover", {}, lambda s: s["state"] == "closed", ["current_position"])

    async def drive_valve(self, e, a):
        features = a.get("supported_features", 0)
        await self.command(e, "valve", "open_valve", {}, lambda s: s["state"] == "open", ["current_position"])
        if features & 4:
            await self.command(e, "valve", "set_valve_position", {"position": 50},
                               lambda s: s["attributes"].get("current_position") == 50, ["current_position"])
        await self.command(e, "valve", "close_valve", {}, lambda s: s["state"] == "closed", ["current_position"])

    async def drive_climate(self, e, a):
        for mode in a.get("hvac_modes") or []:
            await self.command(e, "climate", "set_hvac_mode", {"hvac_mode": mode}, lambda s, m=mode: s["state"] == m,
                               [])
        # turn_off and turn_on, where Home Assistant offers them (ClimateEntityFeature TURN_OFF, TURN_ON).
        features = a.get("supported_features", 0)
        if features & 128:
            await self.command(e, "climate", "turn_off", {}, lambda s: s["state"] == "off", [])
        if features & 256:
            await self.command(e, "climate", "turn_on", {}, lambda s: s["state"] not in ("off", "unavailable"), [])
        # The range offered now: a heater-cooler's single target has its mode's threshold's range.
        a = (await self.state(e))["attributes"]
        lo, hi = a.get("min_temp"), a.get("max_temp")
        step = a.get("target_temp_step") or 0.5
        mid = lo + round((hi - lo) / 2 / step) * step
        if "temperature" in a:
            for t in (lo, mid, hi):
                await self.command(e, "climate", "set_temperature", {"temperature": t},
                                   lambda s, t=t: s["attributes"].get("temperature") == t, ["temperature"])
        if "target_temp_low" in a:
            await self.command(e, "climate", "set_temperature", {"target_temp_low": lo, "target_temp_high": hi},
                               lambda s: (s["attributes"].get("target_temp_low"),
                                          s["attributes"].get("target_temp_high")) == (lo, hi),
                               ["target_temp_low", "target_temp_high"])
        for mode in a.get("fan_modes") or []:
            await self.command(e, "climate", "set_fan_mode", {"fan_mode": mode},
                               lambda s, m=mode: s["attributes"].get("fan_mode") == m, ["fan_mode"])
        for mode in a.get("swing_modes") or []:
            await self.command(e, "climate", "set_swing_mode", {"swing_mode": mode},
                               lambda s, m=mode: s["attributes"].get("swing_mode") == m, ["swing_mode"])
        if "humidity" in a:
            h = a.get("min_humidity", 30)
            await self.command(e, "climate", "set_humidity", {"humidity": h},
                               lambda s, h=h: s["attributes"].get("humidity") == h, ["humidity"])

    async def drive_fan(self, e, a):
        await self.on_off(e, "fan")
        if "percentage" in a:
            step = a.get("percentage_step") or 1
            for pct in sorted({step, round(50 / step) * step, 100}):
                await self.command(e, "fan", "set_percentage", {"percentage": pct},
                                   lambda s, p=pct: abs((s["attributes"].get("percentage") or -99) - p) <= 1,
                                   ["percentage"])
        for mode in a.get("preset_modes") or []:
            await self.command(e, "fan", "set_preset_mode", {"preset_mode": mode},
                               lambda s, m=mode: s["attributes"].get("preset_mode") == m, ["preset_mode"])
        if "oscillating" in a:
            for o in (True, False):
                await self.command(e, "fan", "oscillate", {"oscillating": o},
                                   lambda s, o=o: s["attributes"].get("oscillating") == o, ["oscillating"])
        if "direction" in a:
            for d in ("reverse", "forward"):
                await self.command(e, "fan", "set_direction", {"direction": d},
                                   lambda s, d=d: s["attributes"].get("direction") == d, ["direction"])
        await self.command(e, "fan", "turn_off", {}, lambda s: s["state"] == "off", [])

    async def drive_humidifier(self, e, a):
        await self.on_off(e, "humidifier")
        for h in (a.get("min_humidity"), a.get("max_humidity")):
            await self.command(e, "humidifier", "set_humidity", {"humidity": h},
                               lambda s, h=h: s["attributes"].get("humidity") == h, ["humidity"])
        for mode in a.get("available_modes") or []:
            await self.command(e, "humidifier", "set_mode", {"mode": mode},
                               lambda s, m=mode: s["attributes"].get("mode") == m, ["mode"])

    async def drive_number(self, e, a):
        lo, hi, step = a["min"], a["max"], a.get("step") or 1
        mid = lo + round((hi - lo) / 2 / step) * step
        for v in (lo, mid, hi):
            await self.command(e, "number", "set_value", {"value": v},
                               lambda s, v=v: as_float(s["state"]) is not None and abs(as_float(s["state"]) - v) < 1e-6,
                               [])

    async def drive_select(self, e, a):
        for option in a.get("options") or []:
            await self.command(e, "select", "select_option", {"option": option},
                               lambda s, o=option: s["state"] == o, [])

    async def drive_text(self, e, a):
        value = "HA test"[: a.get("max", 255)]
        await self.command(e, "text", "set_value", {"value": value}, lambda s: s["state"] == value, [])

    async def drive_button(self, e, a):
        before = (await self.state(e))["state"]
        await self.command(e, "button", "press", {}, lambda s: s["state"] != before, [])

    async def drive_alarm_control_panel(self, e, a):
        features = a.get("supported_features", 0)
        for bit, service, state in ((1, "alarm_arm_home", "armed_home"), (2, "alarm_arm_away", "armed_away"),
                                    (4, "alarm_arm_night", "armed_night")):
            if features & bit:
                await self.command(e, "alarm_control_panel", service, {}, lambda s, st=state: s["state"] == st, [])
                await self.command(e, "alarm_control_panel", "alarm_disarm", {},
                                   lambda s: s["state"] == "disarmed", [])


def as_float(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def close_hs(got, want):
    if not got:
        return False
    dh = abs(got[0] - want[0]) % 360
    return min(dh, 360 - dh) <= 2 and abs(got[1] - want[1]) <= 2


async def drive(args):
    token = open(args.token_file).read()
    async with aiohttp.ClientSession() as http:
        driver = Driver(http, args, token)
        ours = expected_unique_ids(args.discovery)  # the gateway's, not another MQTT client's
        entities = [e for e in await mqtt_entities(http, args, token)
                    if e["unique_id"] in ours and not e.get("disabled_by")]
        states = {}
        for e in sorted(entities, key=lambda e: e["entity_id"]):
            await driver.drive(e["entity_id"])
            s = await driver.state(e["entity_id"])
            states[e["entity_id"]] = s and s["state"]
        with open(args.states_file, "w") as f:
            json.dump(states, f)
    rows = driver.rows
    commands = [r for r in rows if r[1] != "(read)"]
    reads = [r for r in rows if r[1] == "(read)"]
    by_domain = {}
    for entity, label, accepted, followed, _ in rows:
        d = by_domain.setdefault(entity.split(".")[0], [0, 0, 0, 0])
        d[0] += label != "(read)"
        d[1] += label != "(read)" and accepted
        d[2] += label != "(read)" and followed
        d[3] += label == "(read)" and followed
    print(f"{'domain':22} {'commands':>8} {'accepted':>8} {'followed':>8} {'read ok':>8}")
    for d, (n, acc, fol, rd) in sorted(by_domain.items()):
        print(f"{d:22} {n:8} {acc:8} {fol:8} {rd:8}")
    accepted = sum(r[2] for r in commands)
    followed = sum(r[3] for r in commands)
    print(f"{'total':22} {len(commands):8} {accepted:8} {followed:8} {sum(r[3] for r in reads):8}"
          f"   ({len(entities)} enabled entities)")
    failures = [r for r in rows if not r[3]]
    for entity, label, accepted, _, detail in failures:
        print(f"FAIL {entity}: {label}: {'accepted, state did not follow' if accepted else 'refused'}: {detail}")
    sys.exit(1 if failures else 0)


async def avail(args):
    token = open(args.token_file).read()
    before = json.load(open(args.states_file))
    wanted = [e for e, s in before.items() if s not in (None, "unavailable")]
    async with aiohttp.ClientSession() as http:
        driver = Driver(http, args, token)
        deadline = time.monotonic() + args.timeout
        while True:
            missing = await unavailable(driver, wanted)
            if not missing:
                break
            if time.monotonic() > deadline:
                sys.exit(f"avail: {len(missing)} entities still unavailable after the restart: {missing[:20]}")
            await asyncio.sleep(0.5)
    print(f"avail: all {len(wanted)} entities available again after the gateway's restart")


async def gone(args):
    """An accessory removed while the gateway was stopped: the components its configs named
    (in `--discovery`, not in `--after`) leave Home Assistant's registry, and every other one
    stays there and available."""
    token = open(args.token_file).read()
    before, after = expected_unique_ids(args.discovery), expected_unique_ids(args.after)
    removed = before - after
    if not removed or not after:
        sys.exit(f"gone: nothing to check ({len(removed)} removed, {len(after)} kept)")
    async with aiohttp.ClientSession() as http:
        deadline = time.monotonic() + args.timeout
        while True:
            have = {e["unique_id"] for e in await mqtt_entities(http, args, token)}
            left, lost = removed & have, after - have
            if not left and not lost:
                break
            if time.monotonic() > deadline:
                sys.exit(f"gone: {len(left)} removed components still in Home Assistant {sorted(left)[:10]}, "
                         f"{len(lost)} kept ones missing {sorted(lost)[:10]}")
            await asyncio.sleep(0.5)
        kept = [e["entity_id"] for e in await mqtt_entities(http, args, token)
                if e["unique_id"] in after and not e.get("disabled_by")]
        driver = Driver(http, args, token)
        while True:
            down = await unavailable(driver, kept)
            if not down:
                break
            if time.monotonic() > deadline:
                sys.exit(f"gone: {len(down)} kept entities unavailable: {down[:20]}")
            await asyncio.sleep(0.5)
    print(f"gone: the {len(removed)} components of the accessory removed while stopped left Home Assistant; "
          f"{len(kept)} enabled entities of the others available")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("step", choices=["setup", "wait", "drive", "avail", "gone"])
    p.add_argument("--url", default="http://127.0.0.1:8123")
    p.add_argument("--broker-port", type=int)
    p.add_argument("--token-file", required=True)
    p.add_argument("--discovery")
    p.add_argument("--states-file")
    p.add_argument("--after")
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--follow", type=float, default=30)
    args = p.parse_args()
    asyncio.run({"setup": setup, "wait": wait, "drive": drive, "avail": avail, "gone": gone}[args.step](args))


if __name__ == "__main__":
    main()
