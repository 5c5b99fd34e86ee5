#!/usr/bin/env bash
# Toggles the Kilgo garage light and prints the gateway's answer; exits 1 if it is an error
# or none comes within 5 seconds.
set -euo pipefail
host=${MQTT_HOST:-127.0.0.1}; port=${MQTT_PORT:-1883}; base=${HOMEMQTT_BASE:-home}
service="$base/garage/garage-door-opener/garage-light"
coproc SUB { exec mosquitto_sub -h "$host" -p "$port" -t "$service/\$result" -C 1 -W 5; }
sleep 0.3
mosquitto_pub -h "$host" -p "$port" -t "$service/\$toggle" -m ''
read -r answer <&"${SUB[0]}" || { echo "no answer within 5 s" >&2; exit 1; }
echo "$answer"
[[ $answer == *'"status":"ok"'* ]]
