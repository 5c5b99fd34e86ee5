#!/usr/bin/env bash
# Tests the Debian package as a user gets it, in clean Debian 12 (bookworm) and 13 (trixie) roots
# made by debootstrap from Debian's packages:
#   1. `apt-get install ./homemqtt_*.deb` pulls in what `Depends` names, makes the homemqtt user
#      and /var/lib/homemqtt (0700);
#   2. the unit's ExecStart runs as its User= with its settings (no systemd as PID 1 needed:
#      ProtectSystem=strict as a read-only root with only the state directory writable, a private
#      /tmp, UMask=0077, $STATE_DIRECTORY, the EnvironmentFile), reaches a mosquitto on the host,
#      serves the simulated home, answers a set, and stops on SIGTERM with exit 0;
#   3. an upgrade onto a state directory written by the previous release (the fixture of
#      Tests/Fixtures/state-14db57d) and a config the user edited keeps both and migrates the
#      state, backup kept; the same rooms come back on the topics;
#   4. `dpkg -r` keeps the config and the state, `dpkg --purge` removes both;
#   5. the tarball's binary runs on the host.
# Needs root (debootstrap, chroot, mounts); runs each root in its own mount namespace.
# HOMEMQTT_PACKAGE_SUITES picks the suites; pristine roots are kept in HOMEMQTT_ROOT_CACHE.
#
# With --if-due (as .ci/run calls it) it runs only when due: when what the package is made of
# (package_inputs below) changed since the run recorded in .ci/package-tested, or when that run
# is 7 days old or more; otherwise it says so and exits 0. A run that passes writes the record,
# to be committed. (The whole of .ci/run with these tests takes over 30 minutes on 2 cores,
# about 9 of them this script's: issue 28 keeps such tests out of every run.)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
record=.ci/package-tested

# A digest of what the package and its test are made of besides the binary's other sources:
# the packaging, these scripts, the config and accessories it ships, the unit, the version, the
# dependencies, and the state formats an upgrade migrates (with the old state's fixture).
package_inputs() {
    find Packaging Scripts/build-package.sh Scripts/test-package.sh Config Examples/homemqtt.service Package.swift \
        Sources/Gateway/Config/HomeMQTTVersion.swift Sources/HomeModel/StateFormat.swift \
        Sources/HomeModel/StateArchive.swift Sources/HomeMQTTApp/StateMigrations.swift Tests/Fixtures/state-14db57d \
        -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
}

if [ "${1:-}" = "--if-due" ]; then
    shift
    inputs=$(package_inputs)
    tested_inputs=$(sed -n 's/^inputs //p' "$record" 2>/dev/null || true)
    tested_on=$(sed -n 's/^date //p' "$record" 2>/dev/null || true)
    age_days=$(((($(date -u +%s) - $(date -u -d "${tested_on:-1970-01-01}" +%s 2>/dev/null || echo 0))) / 86400))
    if [ "$inputs" = "$tested_inputs" ] && [ "$age_days" -lt 7 ]; then
        echo "test-package: not due: the package's inputs ($inputs) passed on $tested_on; due again when they change or on $(date -u -d "$tested_on + 7 days" +%F)"
        exit 0
    fi
    echo "test-package: due: ${tested_inputs:+inputs $tested_inputs → }$inputs, last passed ${tested_on:-never}"
fi

if [ "${1:-}" != "--inside" ]; then
    # Built as the user who runs this, so that dist/ and .build-package stay theirs; the rest as root.
    if [ -z "${HOMEMQTT_PACKAGE_BUILT:-}" ]; then
        Scripts/build-package.sh  # runs Scripts/bootstrap.sh: debootstrap, mosquitto and its clients
    fi
    [ "$(id -u)" -eq 0 ] || exec sudo -E HOMEMQTT_PACKAGE_BUILT=1 "$0" "$@"
    suites=${HOMEMQTT_PACKAGE_SUITES:-bookworm trixie}
    cache=${HOMEMQTT_ROOT_CACHE:-/var/cache/homemqtt-test-roots}
    version=$(.build-package/release/homemqtt --version)
    arch=$(dpkg --print-architecture)
    deb=$repo/dist/homemqtt_${version}_${arch}.deb
    tarball=$repo/dist/homemqtt-$version-linux-$arch.tar.gz

    work=$(mktemp -d /tmp/homemqtt-package-test.XXXXXX)
    broker_pid=""
    cleanup() { [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null; rm -rf "$work"; }
    trap cleanup EXIT

    # The package's libc6 is at least every glibc version the binary asks for (GLIBC_2.x, and
    # GLIBC_ABI_DT_RELR for packed relocations, 2.36): one installed on an older glibc would
    # not start.
    needed=$(readelf -V "$repo/.build-package/release/homemqtt" | sed -n 's/.*Name: GLIBC_\([0-9][0-9.]*\).*/\1/p' | sort -V | tail -1)
    if readelf -V "$repo/.build-package/release/homemqtt" | grep -q 'Name: GLIBC_ABI_DT_RELR' &&
        dpkg --compare-versions "$needed" lt 2.36; then
        needed=2.36
    fi
    declared=$(dpkg-deb -f "$deb" Depends | grep -o 'libc6 (>= [^)]*)' | sed 's/libc6 (>= \(.*\))/\1/')
    dpkg --compare-versions "${declared:-0}" ge "$needed" || {
        echo "test-package: FAILED: Depends says libc6 (>= ${declared:-nothing}), the binary needs glibc $needed" >&2
        exit 1
    }
    echo "test-package: libc6 (>= $declared) for a binary that needs glibc $needed: ok"

    # The tarball, for other distributions: the binary runs and reads its config.
    tar -C "$work" -xzf "$tarball"
    "$work/homemqtt-$version/homemqtt" --version | grep -qx "$version"
    (cd "$work/homemqtt-$version" && sed 's|/usr/share/homemqtt/accessories|accessories|; s|/var/lib/homemqtt|state|' gateway.yml >local.yml &&
        ./homemqtt check-config -c local.yml >/dev/null)
    echo "test-package: tarball: ok"

    # The same package at a higher version, whose default config changed: what an upgrade installs.
    newer=$work/homemqtt_${version}+1_${arch}.deb
    dpkg-deb -R "$deb" "$work/repack"
    sed -i "s/^Version: .*/Version: ${version}+1/" "$work/repack/DEBIAN/control"
    echo "# a line the next version added" >>"$work/repack/etc/homemqtt/gateway.yml"
    dpkg-deb --root-owner-group -Zxz --build "$work/repack" "$newer" >/dev/null
    rm -rf "$work/repack"

    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    printf 'listener %s 127.0.0.1\nallow_anonymous true\n' "$port" >"$work/mosquitto.conf"
    "$(command -v mosquitto || echo /usr/sbin/mosquitto)" -c "$work/mosquitto.conf" >"$work/mosquitto.log" 2>&1 &
    broker_pid=$!

    for suite in $suites; do
        pristine=$cache/$suite
        if [ ! -d "$pristine" ]; then
            echo "test-package: debootstrap $suite (once; kept in $cache)"
            # In a mount namespace of its own, so that an interrupted debootstrap leaves no proc
            # or sys mounted in the partial root (older runs' are taken down first).
            umount -R "$pristine.partial" 2>/dev/null || true
            rm -rf --one-file-system "$pristine.partial"
            mkdir -p "$cache"
            unshare --mount --propagation private \
                debootstrap --variant=minbase "$suite" "$pristine.partial" "${HOMEMQTT_DEBIAN_MIRROR:-http://deb.debian.org/debian}" \
                >"$work/debootstrap-$suite.log" 2>&1 ||
                { tail -20 "$work/debootstrap-$suite.log"; exit 1; }
            mv "$pristine.partial" "$pristine"
        fi
        root=$work/root-$suite
        cp -a "$pristine" "$root"
        cp "$deb" "$newer" "$root/tmp/"
        cp -r Tests/Fixtures/state-14db57d/state "$root/tmp/old-state"
        cp /etc/resolv.conf "$root/etc/resolv.conf"
        unshare --mount --propagation private "$0" --inside "$root" "$(basename "$deb")" "$(basename "$newer")" "$port" "$suite"
        rm -rf "$root"
        echo "test-package: $suite: ok"
    done
    printf 'inputs %s\ndate %s\n' "$(package_inputs)" "$(date -u +%F)" >"$record"
    echo "test-package: recorded in $record"
    exit 0
fi

# Inside a mount namespace of its own: the mounts go when it ends, and so does a gateway left
# running by a failed check.
root=$2 deb=$3 newer=$4 port=$5 suite=$6
gateway_pid=""
trap '[ -n "$gateway_pid" ] && kill -KILL "$gateway_pid" 2>/dev/null; umount -R "$root.view" 2>/dev/null || true' EXIT
fail() { echo "test-package: $suite: FAILED: $*" >&2; exit 1; }
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
topic() { timeout 30 mosquitto_sub -h 127.0.0.1 -p "$port" -C 1 -W 25 -t "$1"; }

in_root apt-get update -qq >/dev/null
in_root apt-get install -y -qq "/tmp/$deb" >/dev/null || fail "apt-get install"
in_root dpkg -s homemqtt | grep -q '^Status: install ok installed' || fail "not installed"
in_root getent passwd homemqtt | grep -q ':/var/lib/homemqtt:/usr/sbin/nologin$' || fail "no homemqtt system user"
owner() { in_root stat -c '%U %a' "$1"; }  # names from the root's own user database
[ "$(owner /var/lib/homemqtt)" = "homemqtt 700" ] || fail "/var/lib/homemqtt is $(owner /var/lib/homemqtt)"
# Enabled as debhelper enables a unit (started too, where systemd runs).
[ -L "$root/etc/systemd/system/multi-user.target.wants/homemqtt.service" ] || fail "the unit is not enabled"
in_root man -w homemqtt >/dev/null 2>&1 || [ -f "$root/usr/share/man/man1/homemqtt.1.gz" ] || fail "no manual page"
# What the binary links is all there: no library is missing in a clean root.
libraries=$(in_root ldd /usr/bin/homemqtt) || fail "ldd /usr/bin/homemqtt failed"
! grep -q 'not found' <<<"$libraries" || fail "a library is missing: $(grep 'not found' <<<"$libraries")"

# The user's settings: the broker, as the unit's EnvironmentFile gives it.
# (mosquitto without a password file lets any credentials in; the password must not reach the log)
secret=not-for-the-log-$RANDOM$RANDOM
printf 'HOMEMQTT_BROKER_URL=mqtt://127.0.0.1:%s\nHOMEMQTT_MQTT_USERNAME=homemqtt\nHOMEMQTT_MQTT_PASSWORD=%s\n' \
    "$port" "$secret" >"$root/etc/homemqtt/environment"
chmod 0600 "$root/etc/homemqtt/environment"

unit=$root/usr/lib/systemd/system/homemqtt.service
setting() { sed -n "s/^$1=//p" "$unit" | head -n 1; }
exec_start=$(setting ExecStart) user=$(setting User) group=$(setting Group) umask_value=$(setting UMask)
state=/var/lib/$(setting StateDirectory)
[ -n "$exec_start" ] && [ "$user" = homemqtt ] && [ "$umask_value" = 0077 ] || fail "unexpected unit settings"
# Numeric ids from the root's own user database (chroot may look names up outside it).
ids="$(in_root id -u "$user"):$(in_root getent group "$group" | cut -d: -f3)"
mapfile -t environment < <(grep -v '^#' "$root/etc/homemqtt/environment")

# ProtectSystem=strict, StateDirectory=, PrivateTmp=: a read-only view of the root with the state
# directory writable and a /tmp of its own.
view=$root.view
mkdir -p "$view"
mount --bind "$root" "$view"
mount -o remount,bind,ro "$view"
mount --bind "$root$state" "$view$state"
mount -t proc proc "$view/proc"
mount --rbind /dev "$view/dev"
mount -t tmpfs -o mode=1777 tmpfs "$view/tmp"

start_gateway() {
    # shellcheck disable=SC2086  # ExecStart is split into words, as systemd splits it
    chroot --userspec="$ids" "$view" env -i PATH=/usr/bin:/bin "STATE_DIRECTORY=$state" \
        "${environment[@]}" /bin/sh -c "umask $umask_value; exec $exec_start" \
        >"$root/tmp/gateway.log" 2>&1 &
    gateway_pid=$!
}
stop_gateway() {
    kill -TERM "$gateway_pid"
    local status=0
    wait "$gateway_pid" || status=$?
    gateway_pid=""
    [ "$status" -eq 0 ] || fail "the gateway exited $status on SIGTERM: $(tail -5 "$root/tmp/gateway.log")"
}

start_gateway
door=home/garage/garage-door-opener/garage-door/current-door-state/state
[ "$(topic "$door")" = 1 ] || fail "the simulated garage door is not on the broker: $(tail -5 "$root/tmp/gateway.log")"
# mosquitto_rr subscribes to the answer's topic before it sends the set.
light=home/garage/garage-door-opener/garage-light/power-state
result=$(timeout 30 mosquitto_rr -h 127.0.0.1 -p "$port" -W 25 -t "$light/set" -e "$light/result" -m true)
echo "$result" | grep -q '"status":"ok"' || fail "set answered '$result'"
stop_gateway
for file in "$state/home.json" "$state/state.json"; do
    [ "$(owner "$file")" = "homemqtt 600" ] || fail "$file is $(owner "$file")"
done
! grep -q "$secret" "$root/tmp/gateway.log" || fail "the broker password is in the log"

# Backup and restore as Docs/install.md gives them: the backup by root, outside the state; the
# restore as the state's owner (as root it is refused: root's files would lock the gateway out).
in_root sh -c 'cd /root && homemqtt backup --output homemqtt-backup.json' >/dev/null || fail "homemqtt backup"
[ "$(owner /root/homemqtt-backup.json)" = "root 600" ] || fail "the backup is $(owner /root/homemqtt-backup.json)"
! in_root homemqtt restore --replace /root/homemqtt-backup.json >/dev/null 2>&1 || fail "root restored into homemqtt's state"
in_root sh -c 'cat /root/homemqtt-backup.json | runuser -u homemqtt -- homemqtt restore --replace -' >/dev/null ||
    fail "homemqtt restore as homemqtt"
for file in "$state/home.json" "$state/state.json"; do
    [ "$(owner "$file")" = "homemqtt 600" ] || fail "after the restore, $file is $(owner "$file")"
done

# An upgrade: the user edited the config; the state is the previous release's (14db57d).
sed -i 's/^poll-interval: 60 /poll-interval: 30 /' "$root/etc/homemqtt/gateway.yml"
grep -q '^poll-interval: 30 ' "$root/etc/homemqtt/gateway.yml" || fail "could not edit the config"
find "$root$state" -mindepth 1 -delete
cp -r "$root/tmp/old-state/." "$root$state/"
in_root chown -R homemqtt:homemqtt "$state"
# As unattended-upgrades does: keep the edited config, put the package's new one beside it.
in_root apt-get install -y -qq -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "/tmp/$newer" >/dev/null ||
    fail "apt-get install (upgrade)"
in_root dpkg -s homemqtt | grep -q "^Version: .*+1$" || fail "the upgrade did not install"
grep -q '^poll-interval: 30 ' "$root/etc/homemqtt/gateway.yml" || fail "the upgrade replaced the edited config"
grep -q 'a line the next version added' "$root/etc/homemqtt/gateway.yml.dpkg-dist" || fail "no gateway.yml.dpkg-dist beside the edited config"
start_gateway
# The fixture moved the garage door opener to its Workshop room.
[ "$(topic "home/workshop/garage-door-opener/garage-door/current-door-state/state")" = 1 ] ||
    fail "the old state's rooms are not on the topics: $(tail -5 "$root/tmp/gateway.log")"
stop_gateway
grep -q "migrated the state directory" "$root/tmp/gateway.log" || fail "no word of the migration in the log"
ls -d "$root$state"/backups/format-1-* >/dev/null || fail "no backup of the old state"
grep -q '"format": 3' "$root$state/state.json" || fail "state.json not written"
grep -q '"version" : 2' "$root$state/home.json" || fail "home.json not migrated to version 2"

umount -R "$view"
# remove keeps the config and the state; purge removes them.
in_root dpkg -r homemqtt >/dev/null
[ ! -e "$root/usr/bin/homemqtt" ] || fail "dpkg -r left the binary"
[ -f "$root/etc/homemqtt/gateway.yml" ] && [ -f "$root$state/home.json" ] || fail "dpkg -r removed the config or the state"
in_root dpkg --purge homemqtt >/dev/null
[ ! -e "$root/etc/homemqtt/gateway.yml" ] && [ ! -e "$root$state" ] || fail "dpkg --purge left the config or the state"
[ ! -e "$root/etc/systemd/system/multi-user.target.wants/homemqtt.service" ] || fail "dpkg --purge left the unit enabled"
in_root dpkg -s homemqtt >/dev/null 2>&1 && fail "still known to dpkg after purge"
exit 0
