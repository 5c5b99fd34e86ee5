#!/usr/bin/env bash
# Toggles the Kilgo garage light and prints the gateway's answer. Exits 0 when the answer is
# ok, 1 when it is an error, when none comes within TOGGLE_TIMEOUT seconds (5), or when the
# broker or the gateway cannot be reached (saying which).
# Environment: MQTT_HOST (127.0.0.1), MQTT_PORT (1883), HOMEMQTT_BASE (home), TOGGLE_TIMEOUT.
set -euo pipefail
host=${MQTT_HOST:-127.0.0.1}; port=${MQTT_PORT:-1883}; base=${HOMEMQTT_BASE:-home}
timeout=${TOGGLE_TIMEOUT:-5}
accessory="$base/garage/garage-door-opener"
service="$accessory/garage-light"
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

# The subscriber runs until its answer or TOGGLE_TIMEOUT; a FIFO (not a coproc, whose
# variables vanish the moment it exits) hands its lines over. The accessory's retained
# $availability is subscribed last, in the same request as $result: once it arrives, the
# broker has both subscriptions, so the answer to the toggle cannot be missed.
mkfifo "$work/lines"
mosquitto_sub -h "$host" -p "$port" -v -W "$timeout" \
    -t "$service/\$result" -t "$accessory/\$availability" >"$work/lines" 2>"$work/errors" &
sub_pid=$!
exec 3<"$work/lines"

# Called at the subscriber's end of output: a timeout is the caller's to explain; anything
# else means no broker (mosquitto_sub said why on stderr).
subscriber_ended() {
    local status=0
    wait "$sub_pid" || status=$?
    sub_pid=""
    if [ "$status" -ne 27 ]; then
        echo "no broker at $host:$port: $(tr '\n' ' ' <"$work/errors")" >&2
        exit 1
    fi
}

availability=""
while [ -z "$availability" ]; do
    if ! IFS=' ' read -r topic payload <&3; then
        subscriber_ended
        echo "nothing at $accessory/\$availability within ${timeout}s: is the gateway running" \
            "(base topic $base)?" >&2
        exit 1
    fi
    if [ "$topic" = "$accessory/\$availability" ]; then availability=${payload:-unknown}; fi
done

if ! mosquitto_pub -h "$host" -p "$port" -t "$service/\$toggle" -m '' 2>"$work/pub-errors"; then
    echo "could not publish to $host:$port: $(tr '\n' ' ' <"$work/pub-errors")" >&2
    exit 1
fi

while IFS=' ' read -r topic payload <&3; do
    if [ "$topic" != "$service/\$result" ]; then continue; fi
    echo "$payload"
    if [[ $payload == *'"status":"ok"'* ]]; then exit 0; fi
    exit 1
done
subscriber_ended
echo "no answer within ${timeout}s (the accessory is $availability)" >&2
exit 1
