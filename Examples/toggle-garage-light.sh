#!/usr/bin/env bash
# Toggles the Kilgo garage light and prints the gateway's answer.
set -euo pipefail
host=${MQTT_HOST:-127.0.0.1}; port=${MQTT_PORT:-1883}; base=${HOMEMQTT_BASE:-home}
service="$base/garage/garage-door-opener/garage-light"
mosquitto_sub -h "$host" -p "$port" -t "$service/\$result" -C 1 -W 5 &
sleep 0.3
mosquitto_pub -h "$host" -p "$port" -t "$service/\$toggle" -m ''
wait
