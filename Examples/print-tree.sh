#!/usr/bin/env bash
# Prints the gateway's scoped tree: every room, accessory and topic (pretty with python3, as it
# comes without). Exits 1, saying which, when the broker cannot be reached or no gateway has
# published its tree within TREE_TIMEOUT seconds (5).
# Environment: MQTT_HOST (127.0.0.1), MQTT_PORT (1883), HOMEMQTT_BASE (home), TREE_TIMEOUT.
set -euo pipefail
host=${MQTT_HOST:-127.0.0.1}; port=${MQTT_PORT:-1883}; base=${HOMEMQTT_BASE:-home}
timeout=${TREE_TIMEOUT:-5}
if ! command -v mosquitto_sub >/dev/null; then
    echo "needs mosquitto_sub (Debian: mosquitto-clients)" >&2
    exit 1
fi

errors=$(mktemp)
trap 'rm -f "$errors"' EXIT

status=0
tree=$(mosquitto_sub -h "$host" -p "$port" -t "$base/\$gateway/tree" -C 1 -W "$timeout" 2>"$errors") || status=$?
if [ "$status" -eq 27 ]; then
    echo "no tree at $base/\$gateway/tree within ${timeout}s: is the gateway running (base topic $base)?" >&2
    exit 1
elif [ "$status" -ne 0 ]; then
    echo "no broker at $host:$port: $(tr '\n' ' ' <"$errors")" >&2
    exit 1
elif [ -z "$tree" ]; then
    echo "the tree at $base/\$gateway/tree is empty (a cleared retained message)" >&2
    exit 1
fi

if command -v python3 >/dev/null; then
    printf '%s\n' "$tree" | python3 -m json.tool
else
    printf '%s\n' "$tree"
fi
