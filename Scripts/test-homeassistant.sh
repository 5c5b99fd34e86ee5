#!/usr/bin/env bash
# Checks the gateway's Home Assistant discovery against Home Assistant itself (issue 43), not a
# hand-written template evaluator:
#   1. Home Assistant $HOMEMQTT_HA_VERSION in a Debian 13 (trixie) root, which has the Python 3.13
#      it needs (the host's Debian 12 has 3.11): the pristine root Scripts/test-package.sh keeps is
#      copied once to $cache/ha-<version> and gets python3, a venv and Home Assistant there; later
#      runs reuse it, each through an overlay of its own (the cached root is never written);
#   2. on the host: mosquitto on a free port and the built `homemqtt run` with the shipped config's
#      simulated home, the real devices' dumps and Tests/Fixtures/homeassistant-devices, and Home
#      Assistant discovery, in a temp config and state directory;
#   3. Home Assistant with a fresh config directory, onboarded headlessly, the MQTT integration
#      added by its config flow; every component of the gateway's retained discovery becomes an entity;
#   4. every enabled entity driven through what Home Assistant offers for its domain, its state
#      read back (Scripts/homeassistant-drive.py: a table and the failures);
#   5. moves between homes: entity ids kept, commands followed through the other home's topics
#      (Scripts/homeassistant-sites.py);
#   6. the gateway restarted (SIGTERM: exit 0, every home's status offline), every entity back;
#   7. an accessory removed while the gateway is stopped: its entities leave, its config cleared once;
#   8. a second site on the same broker: no shared unique id, devices told apart by the site's
#      name, its entities driven, the first site's untouched;
#   and home-assistant.log read for MQTT and template warnings and errors throughout.
# Exits 0 only when every command worked and the log is clean; otherwise 1, with the list.
# Needs root (chroot, mounts) and the network for the first install (pip, from PyPI).
#
# With --if-due it runs only when due: when its inputs (Sources/HomeAssistant, these scripts, the fixtures)
# changed since the run recorded in .ci/homeassistant-tested, or that run is 7 days old or more.
# A run that passes writes the record, to be committed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
record=.ci/homeassistant-tested
version=${HOMEMQTT_HA_VERSION:-2026.2.3}
cache=${HOMEMQTT_ROOT_CACHE:-/var/cache/homemqtt-test-roots}

ha_inputs() {
    find Sources/HomeAssistant Scripts/test-homeassistant.sh Scripts/homeassistant-drive.py \
        Scripts/homeassistant-sites.py Tests/Fixtures/hap-fixtures Tests/Fixtures/homeassistant-devices \
        -type f -print0 |
        LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
}

if [ "${1:-}" = "--if-due" ]; then
    shift
    inputs=$(ha_inputs)
    tested_inputs=$(sed -n 's/^inputs //p' "$record" 2>/dev/null || true)
    tested_on=$(sed -n 's/^date //p' "$record" 2>/dev/null || true)
    age_days=$(((($(date -u +%s) - $(date -u -d "${tested_on:-1970-01-01}" +%s 2>/dev/null || echo 0))) / 86400))
    if [ "$inputs" = "$tested_inputs" ] && [ "$age_days" -lt 7 ]; then
        echo "test-homeassistant: not due: its inputs ($inputs) passed on $tested_on"
        exit 0
    fi
    echo "test-homeassistant: due: ${tested_inputs:+inputs $tested_inputs → }$inputs, last passed ${tested_on:-never}"
fi

if [ -z "${HOMEMQTT_HA_UNSHARED:-}" ]; then
    # Built as the user who runs this; the rest as root, in a mount namespace of its own, so
    # that the overlay and the root's proc and dev go when the run ends, however it ends.
    if [ -z "${HOMEMQTT_BINARY:-}" ]; then
        swift build --product homemqtt >/dev/null
        export HOMEMQTT_BINARY=$repo/.build/debug/homemqtt
    fi
    [ "$(id -u)" -eq 0 ] || exec sudo -E "$0" "$@"
    HOMEMQTT_HA_UNSHARED=1 exec unshare --mount --propagation private "$0" "$@"
fi

say() { echo "test-homeassistant: $*"; }
seconds() { echo $(($(date +%s) - $1)); }
# The host's trust store, for pip in the root: where TLS goes through an inspecting proxy, its CA
# is there and not in Debian's bundle.
root_env=(env -i PATH=/opt/ha/bin:/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 HOME=/root
    PIP_CERT=/etc/host-ca.crt PIP_DISABLE_PIP_VERSION_CHECK=1 DEBIAN_FRONTEND=noninteractive)
in_root() { chroot "$1" "${root_env[@]}" "${@:2}"; }

# 1. Home Assistant's root, made once per version.
ha_root=$cache/ha-$version
if [ ! -d "$ha_root" ]; then
    [ -d "$cache/trixie" ] || { say "no $cache/trixie: run Scripts/test-package.sh once (it makes it)"; exit 1; }
    started=$(date +%s)
    say "installing Home Assistant $version in a copy of the trixie root (once; kept in $ha_root)"
    umount -R "$ha_root.partial/proc" "$ha_root.partial/dev" 2>/dev/null || true
    rm -rf --one-file-system "$ha_root.partial"
    cp -a "$cache/trixie" "$ha_root.partial"
    cp /etc/resolv.conf "$ha_root.partial/etc/resolv.conf"
    cp /etc/ssl/certs/ca-certificates.crt "$ha_root.partial/etc/host-ca.crt"
    mount -t proc proc "$ha_root.partial/proc"
    mount --rbind /dev "$ha_root.partial/dev"
    in_root "$ha_root.partial" apt-get update -qq >/dev/null
    in_root "$ha_root.partial" apt-get install -y -qq --no-install-recommends \
        python3 python3-venv python3-dev gcc libc6-dev ca-certificates >/dev/null
    in_root "$ha_root.partial" python3 -m venv /opt/ha
    in_root "$ha_root.partial" pip install -q "homeassistant==$version"
    # What the integrations this run loads need (Home Assistant would pip-install them at its
    # start otherwise, into each run's overlay): their manifests' requirements, pinned by HA.
    in_root "$ha_root.partial" python3 -c '
import json, pathlib, homeassistant.components as c
base = pathlib.Path(c.__path__[0]); todo = ["mqtt", "onboarding", "config", "api", "http", "person", "auth",
    "websocket_api", "logger", "system_log", "frontend", "analytics", "backup", "repairs", "diagnostics"]
seen, reqs = set(), set()
while todo:
    name = todo.pop()
    if name in seen or not (base / name / "manifest.json").exists(): continue
    seen.add(name); m = json.loads((base / name / "manifest.json").read_text())
    reqs.update(m.get("requirements", [])); todo += m.get("dependencies", []) + m.get("after_dependencies", [])
print("\n".join(sorted(reqs)))' >"$ha_root.partial/tmp/requirements.txt"
    in_root "$ha_root.partial" pip install -q -r /tmp/requirements.txt
    umount -R "$ha_root.partial/proc" "$ha_root.partial/dev"
    mv "$ha_root.partial" "$ha_root"
    say "installed in $(seconds "$started") s"
else
    say "Home Assistant $version: the root installed before, $ha_root"
fi

work=$(mktemp -d /tmp/homemqtt-ha-test.XXXXXX)
broker_pid="" gateway_pid="" site_pid="" ha_pid=""
cleanup() {
    local rc=$?
    # (Each its own statement: under errexit a failing `wait` in an && list would end the trap.)
    for pid in $ha_pid $site_pid $gateway_pid $broker_pid; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    umount -R "$work/root" 2>/dev/null || true
    [ -n "${HOMEMQTT_HA_KEEP:-}" ] && say "kept $work" || rm -rf --one-file-system "$work"
    exit "$rc"
}
trap cleanup EXIT
run_started=$(date +%s)

# 2. The broker and the gateway, on the host.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
printf 'listener %s 127.0.0.1\nallow_anonymous true\n' "$port" >"$work/mosquitto.conf"
"$(command -v mosquitto || echo /usr/sbin/mosquitto)" -c "$work/mosquitto.conf" >"$work/mosquitto.log" 2>&1 &
broker_pid=$!
# The shipped home, every real device's `/accessories` dump of Tests/Fixtures/hap-fixtures (the
# simulator imports a `.json` file in its directory as a dump), as issue 43 asks, and the kinds
# of device the two lack (Tests/Fixtures/homeassistant-devices: a valve, a blind, an alarm...).
# HOMEMQTT_HA_ACCESSORIES: another directory of accessory files instead (not recorded).
if [ -n "${HOMEMQTT_HA_ACCESSORIES:-}" ]; then
    accessories=$(realpath "$HOMEMQTT_HA_ACCESSORIES")
else
    accessories=$work/accessories
    cp -r Config/accessories "$accessories"
    cp Tests/Fixtures/hap-fixtures/*.json Tests/Fixtures/homeassistant-devices/*.yml "$accessories/"
fi
sed -e "s|mqtt://127.0.0.1:1883|mqtt://127.0.0.1:$port|; s|^state-directory: .*|state-directory: $work/state|" \
    -e "s|directory: accessories|directory: $accessories|" Config/gateway.yml >"$work/gateway.yml"
grep -A1 '^homeassistant:' "$work/gateway.yml" | grep -q 'enabled: true' ||
    { say "the shipped config does not enable Home Assistant discovery"; exit 1; }
status_of() { # base topic: its retained $gateway/status, or nothing
    mosquitto_sub -h 127.0.0.1 -p "$port" -t "$1/\$gateway/status" --retained-only -C 1 -W 1 -F '%p' 2>/dev/null || true
}
# Each home of a gateway (one per base topic) logs "gateway online" once its tree and discovery
# configs, and the clears of what it no longer publishes, are queued, and `online` after them on
# its connection; so once the broker holds `online` (it held `offline` from the stop before), it
# holds all of that.
wait_online() { # pid, log, lines of the log before this start, its homes' base topics
    local base
    for base in "${@:4}"; do
        for _ in $(seq 600); do
            tail -n +"$(($3 + 1))" "$2" | grep -q "base=$base .*gateway online" && break
            kill -0 "$1" 2>/dev/null || { tail "$2"; say "the gateway of $2 ended"; exit 1; }
            sleep 0.1
        done
        for _ in $(seq 120); do
            [ "$(status_of "$base")" = online ] && continue 2
            sleep 0.5
        done
        say "the gateway of $2 did not bring $base online in 60 s"; exit 1
    done
}
bases=(home) # the first gateway's homes
start_gateway() {
    "$HOMEMQTT_BINARY" run -c "$work/gateway.yml" >>"$work/gateway.log" 2>&1 &
    gateway_pid=$!
    wait_online "$gateway_pid" "$work/gateway.log" "$1" "${bases[@]}"
}
# SIGTERM: the gateway exits 0, and each home's status says `offline`.
stop_gateway() {
    local base
    kill -TERM "$gateway_pid"
    wait "$gateway_pid" || { say "the gateway's exit status on SIGTERM: $?"; status=1; }
    for base in "${bases[@]}"; do
        [ "$(status_of "$base")" = offline ] || { say "$base/\$gateway/status after the stop: not offline"; status=1; }
    done
}
start_gateway 0

# 3. Home Assistant in an overlay of its root, with a fresh config directory.
mkdir -p "$work/upper" "$work/overlay-work" "$work/root"
mount -t overlay overlay -o "lowerdir=$ha_root,upperdir=$work/upper,workdir=$work/overlay-work" "$work/root"
root=$work/root
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
cp Scripts/homeassistant-drive.py "$root/tmp/drive.py"
cp Scripts/homeassistant-sites.py "$root/tmp/sites.py"
# Every retained discovery config the gateway published (one JSON payload a line): what HA must show.
timeout 10 mosquitto_sub -h 127.0.0.1 -p "$port" -t 'homeassistant/#' --retained-only -W 3 -F '%p' \
    >"$root/tmp/discovery.jsonl" 2>/dev/null || true
say "$(grep -c . "$root/tmp/discovery.jsonl") retained discovery configs"
ha_port=$(free_port)
config=$root/tmp/ha-config
mkdir -p "$config"
cat >"$config/configuration.yaml" <<EOF
homeassistant:
  name: HomeMQTT test
  unit_system: metric
  time_zone: UTC
  latitude: 52.5
  longitude: 13.4
  elevation: 30
  country: DE
  currency: EUR
http:
  server_host: 127.0.0.1
  server_port: $ha_port
api:
config:
onboarding:
logger:
  default: info
EOF
ha_started=$(date +%s)
# chroot and env exec, so that $ha_pid is Home Assistant's own (a function in the background would be a subshell).
chroot "$root" "${root_env[@]}" hass -c /tmp/ha-config --skip-pip --log-file /tmp/ha-config/home-assistant.log \
    >"$work/hass.out" 2>&1 &
ha_pid=$!
drive() { in_root "$root" python3 /tmp/drive.py "$@" --url "http://127.0.0.1:$ha_port" --token-file /tmp/token; }
sites() { in_root "$root" python3 /tmp/sites.py "$@" --url "http://127.0.0.1:$ha_port" --token-file /tmp/token; }
drive setup --broker-port "$port" || { tail -30 "$config/home-assistant.log"; exit 1; }
drive wait --discovery /tmp/discovery.jsonl
status=0
sites diagnostic --discovery /tmp/discovery.jsonl || status=1
say "Home Assistant up, onboarded and every entity discovered in $(seconds "$ha_started") s"

# 4. Every entity driven.
drive_started=$(date +%s)
drive drive --discovery /tmp/discovery.jsonl --states-file /tmp/states.json || status=1
say "driven in $(seconds "$drive_started") s"

# 5. Moves between homes: a home added, a bridged light and a switch moved there, back, and the
# switch there again (it stays there through the restart and the removal below). Each time, their
# entities keep their ids (unique ids follow the accessory, not the base topic), Home Assistant
# gains no entity but the new home's gateway device, and every command they offer is followed,
# which it can only be through the new home's topics (the old ones are cleared).
request() { # op, JSON: the gateway's answer must be ok
    local answer
    answer=$(mosquitto_rr -h 127.0.0.1 -p "$port" -V mqttv5 -t "home/\$gateway/request/$1" \
        -e "home/\$gateway/response/$1" -m "$2" -W 10) || { say "$1: no answer"; return 1; }
    grep -q '"status":"ok"' <<<"$answer" || { say "$1 $2: $answer"; return 1; }
}
move() { # home, label, accessory ids: moved, then checked through Home Assistant
    local home=$1 label=$2 id nodes=()
    shift 2
    for id in "$@"; do
        request accessory/home "{\"accessory\":\"$id\",\"home\":\"$home\"}" || return 1
        nodes+=(--node "homemqtt_$(tr -c 'a-z0-9\n' _ <<<"$id")")
    done
    sites moved --discovery /tmp/discovery.jsonl --registry /tmp/registry.json "${nodes[@]}" --label "$label"
}
if [ -z "${HOMEMQTT_HA_ACCESSORIES:-}" ]; then
    moves_started=$(date +%s)
    { sites registry --out /tmp/registry.json && request home/add '{"name":"Cabin"}' && bases+=(home-cabin) &&
        move Cabin "to Cabin" sim:office-switch sim:lumen-bridge:2 &&
        move "My Home" "back to My Home" sim:office-switch sim:lumen-bridge:2 &&
        move Cabin "to Cabin again" sim:office-switch; } || status=1
    say "moves between homes checked in $(seconds "$moves_started") s"
fi

# 6. The log, before and after a restart of the gateway.
# Home Assistant's own echo of a device's removal is not a problem of ours (step 7 says why).
echo_of_removal='No device components to cleanup for homemqtt_sim_koogeek_ls1_1,'
log_problems() {
    grep -E '^[0-9-]+ [0-9:.]+ (WARNING|ERROR|CRITICAL) ' "$config/home-assistant.log" |
        grep -iE 'mqtt|template|jinja' | grep -vF "$echo_of_removal" || true
}
problems=$(log_problems)
stop_gateway
start_gateway "$(wc -l <"$work/gateway.log")"
drive avail --states-file /tmp/states.json || status=1
# 7. An accessory removed while the gateway is stopped (the Koogeek bulb's dump; not from a
# directory of the caller's, HOMEMQTT_HA_ACCESSORIES): its entities leave Home Assistant, the
# others stay.
if [ -z "${HOMEMQTT_HA_ACCESSORIES:-}" ]; then
    stop_gateway
    removed=$accessories/koogeek_ls1.json
    rm "$removed"
    say "removed $(basename "$removed") while the gateway was stopped"
    # Every clear of its config on the wire. The gateway sends one. Home Assistant, having
    # removed the device's N components, publishes an empty payload to the discovery topic of
    # each entity it removed (mqtt/entity.py, async_remove_discovery_payload), which for a
    # device's config is the device's topic, and warns at each that it has nothing left to clean
    # up (mqtt/discovery.py). So at most N clears in all: one more is a second clear of ours.
    config_topic=homeassistant/device/homemqtt_sim_koogeek_ls1_1/config
    components=$(python3 -c 'import json, sys
print(max((len(c.get("cmps") or c.get("components") or {}) for c in map(json.loads, filter(None, map(str.strip, open(sys.argv[1]))))
          if "koogeek_ls1_1" in json.dumps(c)), default=0))' "$root/tmp/discovery.jsonl")
    timeout 30 mosquitto_sub -h 127.0.0.1 -p "$port" -t "$config_topic" -F '%l' >"$work/clears.txt" 2>/dev/null &
    clears_pid=$!
    sleep 0.5
    start_gateway "$(wc -l <"$work/gateway.log")"
    timeout 10 mosquitto_sub -h 127.0.0.1 -p "$port" -t 'homeassistant/#' --retained-only -W 3 -F '%p' \
        >"$root/tmp/discovery-after.jsonl" 2>/dev/null || true
    drive gone --discovery /tmp/discovery.jsonl --after /tmp/discovery-after.jsonl || status=1
    sleep 2
    kill "$clears_pid" 2>/dev/null || true
    wait "$clears_pid" 2>/dev/null || true
    cleared=$(grep -cx 0 "$work/clears.txt" || true)
    say "the removed device's config cleared $cleared times on the wire (the gateway once, Home Assistant's" \
        "echoes of its $components components)"
    if [ "$cleared" -lt 1 ] || [ "$cleared" -gt "$components" ]; then
        say "the removed device's config was cleared $cleared times: the gateway's one and at most" \
            "$((components - 1)) echoes were expected"
        status=1
    fi
fi
# 8. A second site on the same broker: another gateway with the same home on a base topic and a
# state directory of its own, and a site name, shown before its devices' names and areas. No
# unique id is shared, its devices are told apart from the first site's by name, each of its
# entities follows every command, and the first site's entities are untouched by them.
if [ -z "${HOMEMQTT_HA_ACCESSORIES:-}" ]; then
    site_started=$(date +%s)
    cp -r "$accessories" "$work/accessories-lake"
    sed -e "s|^base-topic: home|base-topic: lake|; s|client-id: homemqtt|client-id: homemqtt-lake|" \
        -e "s|^state-directory: .*|state-directory: $work/state-lake|" \
        -e "s|directory: $accessories\$|directory: $work/accessories-lake|" \
        -e "s|^  # site-name: .*|  site-name: Lake House|; s|^  # site-name-in: .*|  site-name-in: [device-name, area]|" \
        "$work/gateway.yml" >"$work/gateway-lake.yml"
    [ "$(grep -cE '^(base-topic: lake|  site-name: Lake House|  site-name-in: \[)' "$work/gateway-lake.yml")" = 3 ] ||
        { say "the second site's config was not made"; exit 1; }
    "$HOMEMQTT_BINARY" run -c "$work/gateway-lake.yml" >"$work/gateway-lake.log" 2>&1 &
    site_pid=$!
    wait_online "$site_pid" "$work/gateway-lake.log" 0 lake
    timeout 10 mosquitto_sub -h 127.0.0.1 -p "$port" -t 'homeassistant/#' --retained-only -W 3 -F '%p' \
        >"$work/discovery-all.jsonl" 2>/dev/null || true
    lake_status='"topic":"lake/$gateway/status"'
    grep '^{' "$work/discovery-all.jsonl" | grep -F "$lake_status" >"$root/tmp/discovery-lake.jsonl" || true
    grep '^{' "$work/discovery-all.jsonl" | grep -vF "$lake_status" >"$root/tmp/discovery-home.jsonl" || true
    { sites states --discovery /tmp/discovery-home.jsonl --out /tmp/states-home.json &&
        sites sites --discovery /tmp/discovery-home.jsonl --site-discovery /tmp/discovery-lake.jsonl \
            --site-name "Lake House"; } || status=1
    drive drive --discovery /tmp/discovery-lake.jsonl --states-file /tmp/states-lake.json || status=1
    sites unchanged --discovery /tmp/discovery-home.jsonl --states-file /tmp/states-home.json || status=1
    kill -TERM "$site_pid"
    wait "$site_pid" || { say "the second site's exit status on SIGTERM: $?"; status=1; }
    site_pid=""
    say "the second site checked in $(seconds "$site_started") s"
fi
after=$(log_problems)
if [ -n "$after" ]; then
    say "MQTT and template warnings and errors in home-assistant.log" \
        "(those of the restart and the removal after the first $(grep -c . <<<"$problems")):"
    echo "$after"
    status=1
fi
others=$(grep -cE '^[0-9-]+ [0-9:.]+ (WARNING|ERROR|CRITICAL) ' "$config/home-assistant.log" || true)
say "home-assistant.log: $others warnings and errors in all" \
    "(HOMEMQTT_HA_KEEP=1 keeps it, in <work>/upper/tmp/ha-config)"
for log in "$work/gateway.log" "$work/gateway-lake.log"; do
    [ -f "$log" ] || continue
    say "$(basename "$log"): $(grep -cE ' (warning|error|critical) ' "$log" || true) warnings and errors"
    grep -E ' (warning|error|critical) ' "$log" | head -40 || true
done
say "run took $(seconds "$run_started") s"
if [ "$status" -ne 0 ]; then
    say "FAILED"
    exit 1
fi
if [ -n "${HOMEMQTT_HA_ACCESSORIES:-}" ]; then
    say "passed (on $accessories: not recorded; the record is the shipped home's and the dumps')"
    exit 0
fi
printf 'inputs %s\ndate %s\n' "$(ha_inputs)" "$(date -u +%F)" >"$repo/$record"
say "passed; recorded in $record"
