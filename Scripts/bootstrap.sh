#!/usr/bin/env bash
# Installs what HomeMQTT needs on a Debian machine, idempotently and without questions:
# libmosquitto, libsodium, libqrencode and libcoap3 (build), mosquitto and its clients (tests, local broker), zbar-tools
# (zbarimg reads the setup QR codes back in the tests), openssl (TLS tests),
# systemd-analyze and util-linux (the systemd unit's tests), rabbitmq-server (a second broker the
# tests run the gateway against), chromium and chromium-driver (the web view's browser test),
# nodejs and node-mqtt (MQTT.js, the client Node-RED uses, for the Node-RED test), valgrind
# (homemqtt-bench's instruction counts, run by Scripts/bench-smoke.sh), dpkg-dev and debootstrap (the
# Debian package and its tests), and a
# Python venv with the test peers of Tests/requirements.txt (HAP-python, the real HAP peer;
# paho-mqtt, for the Homie v5 controller; selenium, to drive chromium; aiohomekit, a second
# HomeKit controller; python-zeroconf, an independent mDNS browser of the bridge's announcement;
# Jinja2, Home Assistant's template engine, for HomeAssistantTests; aiocoap, an independent CoAP peer).
#
# With --run: only what running the gateway needs (Scripts/run-simulated-home.sh): libmosquitto,
# libsodium, libqrencode and libcoap3 to build it, and mosquitto and its clients for the local broker; none of the test tools.
set -euo pipefail
cd "$(dirname "$0")/.."

only_run=false
[ "${1:-}" = "--run" ] && only_run=true

install_missing() {
    [ $# -gt 0 ] || return 0
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "bootstrap: installing $*"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

need=()
command -v pkg-config >/dev/null || need+=(pkg-config)
pkg-config --exists libmosquitto 2>/dev/null || need+=(libmosquitto-dev)
# HAP's session frames (HAPSessionCipher, ChaCha20-Poly1305); the -dev package brings libsodium23.
pkg-config --exists libsodium 2>/dev/null || need+=(libsodium-dev)
# The HomeKit bridge's setup QR code (SetupQR); the -dev package brings the runtime libqrencode4.
pkg-config --exists libqrencode 2>/dev/null || need+=(libqrencode-dev)
# HAP over Thread's CoAP transport (the CoAP module, issue 42): libcoap 3 without (D)TLS.
pkg-config --exists libcoap-3-notls 2>/dev/null || need+=(libcoap3-dev)
command -v mosquitto >/dev/null || [ -x /usr/sbin/mosquitto ] || need+=(mosquitto)
command -v mosquitto_pub >/dev/null || need+=(mosquitto-clients)
if $only_run; then
    install_missing ${need[@]+"${need[@]}"}
    echo "bootstrap: ready to run"
    exit 0
fi
command -v openssl >/dev/null || need+=(openssl)
# zbarimg: a QR reader independent of libqrencode, for the tests that read the setup QR codes back.
command -v zbarimg >/dev/null || need+=(zbar-tools)
# systemd-analyze checks Examples/homemqtt.service; unshare runs the binary with the unit's read-only
# /etc; setpriv runs it as nobody (a config file it cannot read).
command -v systemd-analyze >/dev/null || need+=(systemd)
{ command -v unshare && command -v setpriv; } >/dev/null || need+=(util-linux)
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || need+=(rabbitmq-server)
# Headless chromium and its driver: the web view's browser test (driven by selenium from .venv).
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
# MQTT.js as Node-RED uses it: the Node-RED test reads the gateway's state with it.
command -v node >/dev/null || need+=(nodejs)
[ -f /usr/share/nodejs/mqtt/package.json ] || need+=(node-mqtt)
# pgrep: the example scripts' test checks that no subscriber outlives a script.
command -v pgrep >/dev/null || need+=(procps)
# valgrind (callgrind and callgrind_annotate, a Perl script): homemqtt-bench's instruction counts,
# which Scripts/bench-smoke.sh runs.
{ command -v valgrind && command -v callgrind_annotate && command -v perl; } >/dev/null || need+=(valgrind perl)
# The Debian package: dpkg-shlibdeps (its Depends) and strip build it; debootstrap makes the clean
# Debian roots Scripts/test-package.sh installs it into.
{ command -v dpkg-shlibdeps && command -v strip; } >/dev/null || need+=(dpkg-dev binutils)
command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || need+=(debootstrap)
command -v python3 >/dev/null || need+=(python3)
if command -v python3 >/dev/null && ! python3 -c 'import venv, ensurepip' 2>/dev/null; then need+=(python3-venv); fi
install_missing ${need[@]+"${need[@]}"}

# The Debian mosquitto package may start a broker on 1883 as a service; tests never use it.
venv=.venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
# Installed again whenever the requirements differ from those last installed.
if ! cmp -s Tests/requirements.txt "$venv/.installed-requirements"; then
    "$venv/bin/pip" install -q --disable-pip-version-check -r Tests/requirements.txt
    cp Tests/requirements.txt "$venv/.installed-requirements"
fi
echo "bootstrap: ready"
