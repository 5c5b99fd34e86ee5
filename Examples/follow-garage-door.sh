#!/usr/bin/env bash
# Opens (or closes: pass `closed`) the Kilgo garage door, prints what the door reports, and
# ends as soon as the door has stopped: at its target (exit 0), stopped half-way by an
# obstruction (exit 0, says so), or when the gateway refuses the set or nothing happens
# within FOLLOW_TIMEOUT seconds (exit 1).
set -euo pipefail
host=${MQTT_HOST:-127.0.0.1}; port=${MQTT_PORT:-1883}; base=${HOMEMQTT_BASE:-home}
timeout=${FOLLOW_TIMEOUT:-30}
door="$base/garage/garage-door-opener/garage-door"
target=${1:-open}
case "$target" in
    open|0) want=0 ;;
    closed|close|1) want=1 ;;
    *) echo "usage: $0 [open|closed]" >&2; exit 2 ;;
esac

coproc SUB { exec mosquitto_sub -h "$host" -p "$port" -v -W "$timeout" \
    -t "$door/current-door-state/state" -t "$door/obstruction-detected/state" -t "$door/target-door-state/result"; }
trap 'kill "$SUB_PID" 2>/dev/null || true' EXIT
sleep 0.3
mosquitto_pub -h "$host" -p "$port" -t "$door/target-door-state/set" -m "$target"

answered=false; current=""
while read -r topic payload <&"${SUB[0]}"; do
    echo "$topic $payload"
    case "$topic" in
        */result)
            if [[ $payload != *'"status":"ok"'* ]]; then echo "the gateway refused the set: $payload" >&2; exit 1; fi
            answered=true ;;
        */current-door-state/state) current=$payload ;;
    esac
    # 0 open, 1 closed, 4 stopped; 2 and 3 are opening and closing.
    if $answered && [ "$current" = "$want" ]; then echo "door $target"; exit 0; fi
    if $answered && [ "$current" = 4 ]; then echo "door stopped before reaching $target (obstruction?)"; exit 0; fi
done
echo "no end of travel within ${timeout}s" >&2
exit 1
