#!/usr/bin/env bash
# Prints the gateway's scoped tree: every room, accessory and topic (needs python3 for pretty JSON).
set -euo pipefail
host=${MQTT_HOST:-127.0.0.1}; port=${MQTT_PORT:-1883}; base=${HOMEMQTT_BASE:-home}
mosquitto_sub -h "$host" -p "$port" -t "$base/\$gateway/tree" -C 1 -W 5 | python3 -m json.tool
