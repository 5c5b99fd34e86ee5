#!/usr/bin/env bash
# Opens (or closes: pass `closed`) the Kilgo garage door, prints what the door reports, and
# ends as soon as the door has stopped: at its target (exit 0), stopped half-way by an
# obstruction (exit 0, says so), or when the gateway refuses the set, nothing happens within
# FOLLOW_TIMEOUT seconds (30), or the broker or the gateway cannot be reached (exit 1, saying
# which).
# Environment: MQTT_HOST (127.0.0.1), MQTT_PORT (1883), HOMEMQTT_BASE (home), FOLLOW_TIMEOUT.
set -euo pipefail
host=${MQTT_HOST:-127.0.0.1}; port=${MQTT_PORT:-1883}; base=${HOMEMQTT_BASE:-home}
timeout=${FOLLOW_TIMEOUT:-30}
accessory="$base/garage/garage-door-opener"
door="$accessory/garage-door"
target=${1:-open}
case "$target" in
    open|0) want=0 ;;
    closed|close|1) want=1 ;;
    *) echo "usage: $0 [open|closed]" >&2; exit 2 ;;
esac
if ! command -v mosquitto_sub >/dev/null || ! command -v mosquitto_pub >/dev/null; then
    echo "needs mosquitto_sub and mosquitto_pub (Debian: mosquitto-clients)" >&2
    exit 1
fi

work=$(mktemp -d)
sub_pid=""
cleanup() {
    if [ -n "$sub_pid" ]; then
        kill "$sub_pid" 2>/dev/null || true
        wait "$sub_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The subscriber runs until FOLLOW_TIMEOUT; a FIFO (not a coproc, whose variables vanish the
# moment it exits) hands its lines over. The accessory's retained $availability is subscribed
# last, in the same request as the rest: once it arrives, the broker has every subscription,
# and only then is the set sent.
mkfifo "$work/lines"
mosquitto_sub -h "$host" -p "$port" -v -W "$timeout" \
    -t "$door/current-door-state/state" -t "$door/obstruction-detected/state" \
    -t "$door/target-door-state/result" -t "$accessory/\$availability" >"$work/lines" 2>"$work/errors" &
sub_pid=$!
exec 3<"$work/lines"

sent=false; answered=false; current=""
while IFS=' ' read -r topic payload <&3; do
    case "$topic" in
        */\$availability)
            if ! $sent; then
                if ! mosquitto_pub -h "$host" -p "$port" -t "$door/target-door-state/set" -m "$target" \
                    2>"$work/pub-errors"; then
                    echo "could not publish to $host:$port: $(tr '\n' ' ' <"$work/pub-errors")" >&2
                    exit 1
                fi
                sent=true
            fi
            continue ;;
        */result)
            echo "$topic $payload"
            if [[ $payload != *'"status":"ok"'* ]]; then echo "the gateway refused the set: $payload" >&2; exit 1; fi
            answered=true ;;
        */current-door-state/state)
            echo "$topic $payload"
            current=$payload ;;
        *)
            echo "$topic $payload" ;;
    esac
    # 0 open, 1 closed, 4 stopped; 2 and 3 are opening and closing.
    if $answered && [ "$current" = "$want" ]; then echo "door $target"; exit 0; fi
    if $answered && [ "$current" = 4 ]; then echo "door stopped before reaching $target (obstruction?)"; exit 0; fi
done

# The subscriber ended: its timeout (27), or no broker (mosquitto_sub said why).
status=0
wait "$sub_pid" || status=$?
sub_pid=""
if [ "$status" -ne 27 ]; then
    echo "no broker at $host:$port: $(tr '\n' ' ' <"$work/errors")" >&2
elif ! $sent; then
    echo "nothing at $accessory/\$availability within ${timeout}s: is the gateway running (base topic $base)?" >&2
elif ! $answered; then
    echo "no answer to the set within ${timeout}s" >&2
else
    echo "no end of travel within ${timeout}s" >&2
fi
exit 1
