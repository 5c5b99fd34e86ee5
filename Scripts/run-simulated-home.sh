#!/usr/bin/env bash
# Runs the gateway on the built-in simulated home against a broker on 127.0.0.1:1883,
# installing what is missing first and starting a local mosquitto if none answers there.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what running needs (libmosquitto, libsodium, libqrencode, mosquitto and its clients), none of the test tools.
Scripts/bootstrap.sh --run >/dev/null

broker_pid=""
if ! timeout 3 mosquitto_sub -h 127.0.0.1 -p 1883 -t '$SYS/#' -C 1 -W 2 >/dev/null 2>&1 \
   && ! (exec 3<>/dev/tcp/127.0.0.1/1883) 2>/dev/null; then
    echo "run: no broker on 127.0.0.1:1883; starting mosquitto there"
    mosquitto_bin=$(command -v mosquitto || echo /usr/sbin/mosquitto)
    conf=$(mktemp)
    printf 'listener 1883 127.0.0.1\nallow_anonymous true\n' >"$conf"
    # In a session of its own: Ctrl-C reaches the gateway, which goes offline on this broker, and
    # the broker stops after it (the EXIT trap).
    setsid "$mosquitto_bin" -c "$conf" &
    broker_pid=$!
    trap '[ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null; rm -f "$conf"' EXIT
    sleep 0.5
fi

swift build -c release --product homemqtt
# The web view on for the demo, at http://127.0.0.1:8080/ (HOMEMQTT_WEB_ENABLED=false turns it off).
export HOMEMQTT_WEB_ENABLED="${HOMEMQTT_WEB_ENABLED:-true}"
# The home as a HomeKit bridge on port 51826 (its setup code in the log at the first start, and by
# `homemqtt homekit code`); HOMEMQTT_HOMEKIT_ENABLED=false turns it off.
export HOMEMQTT_HOMEKIT_ENABLED="${HOMEMQTT_HOMEKIT_ENABLED:-true}"
# In the background, so that a SIGTERM or Ctrl-C of this script is handed to the gateway and the
# script waits for it to stop before its broker goes: neither an orphaned gateway nor one that
# loses its broker while stopping.
.build/release/homemqtt run --config Config/gateway.yml "$@" &
gateway_pid=$!
trap 'kill -TERM "$gateway_pid" 2>/dev/null' TERM INT
exec_status=0
# A trapped signal ends `wait` early: wait again until the gateway has exited.
while kill -0 "$gateway_pid" 2>/dev/null; do
    exec_status=0
    wait "$gateway_pid" || exec_status=$?
done
exit "$exec_status"
