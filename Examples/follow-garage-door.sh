#!/usr/bin/env bash
# Opens (or closes: pass `closed`) the Kilgo garage door and follows it until it stops.
set -euo pipefail
host=${MQTT_HOST:-127.0.0.1}; port=${MQTT_PORT:-1883}; base=${HOMEMQTT_BASE:-home}
door="$base/garage/garage-door-opener/garage-door"
target=${1:-open}
mosquitto_sub -h "$host" -p "$port" -v -t "$door/current-door-state/state" -t "$door/obstruction-detected/state" -t "$door/target-door-state/result" -W 30 &
sub=$!
sleep 0.3
mosquitto_pub -h "$host" -p "$port" -t "$door/target-door-state/set" -m "$target"
wait "$sub" || true
