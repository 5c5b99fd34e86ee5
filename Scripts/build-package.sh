#!/usr/bin/env bash
# Builds the Debian package and the plain tarball of HomeMQTT into dist/:
#   dist/homemqtt_<version>_<arch>.deb        apt-get install ./dist/homemqtt_*.deb
#   dist/homemqtt-<version>-linux-<arch>.tar.gz  the static binary, for other distributions
# The binary is a release build with the Swift runtime and Foundation linked statically
# (--static-swift-stdlib) and stripped, so it needs only what Debian ships: `Depends` is what
# dpkg-shlibdeps finds the binary links (libc6, libmosquitto1, libsodium23, libqrencode4, …), at the versions of
# the build machine: build on the oldest Debian the package is for (Debian 12 for 12 and 13). The
# network is used only by Scripts/bootstrap.sh (Debian's packages, PyPI) and by SwiftPM to fetch the Swift
# packages Package.swift names into its own build folder (.build-package).
set -euo pipefail
cd "$(dirname "$0")/.."

Scripts/bootstrap.sh >/dev/null

scratch=.build-package
swift build -c release --product homemqtt --static-swift-stdlib --scratch-path "$scratch"
binary="$scratch/release/homemqtt"
version=$("$binary" --version)
arch=$(dpkg --print-architecture)
case "$version" in [0-9]*) ;; *) echo "build-package: '$binary --version' printed '$version'" >&2; exit 1 ;; esac

rm -rf dist/stage
stage=dist/stage/deb
mkdir -p "$stage/DEBIAN" "$stage/usr/bin" "$stage/usr/lib/systemd/system" "$stage/etc/homemqtt" \
    "$stage/usr/share/homemqtt" "$stage/usr/share/doc/homemqtt/examples" "$stage/usr/share/man/man1"

install -m 0755 "$binary" "$stage/usr/bin/homemqtt"
strip --strip-all "$stage/usr/bin/homemqtt"

# The packaged config is the repository's, with the package's paths; Home Assistant discovery is
# off until the user turns it on, so a first install never adds the simulated home's devices to
# a Home Assistant already on the broker.
edit() { # file, sed expression, text that must be there afterwards
    sed -i "$2" "$1"
    grep -q -- "$3" "$1" || { echo "build-package: '$2' did not apply to $1" >&2; exit 1; }
}
config="$stage/etc/homemqtt/gateway.yml"
install -m 0644 Config/gateway.yml "$config"
edit "$config" 's|^state-directory: .*|state-directory: /var/lib/homemqtt   # home database, run-time scope, HAP pairings (systemd: $STATE_DIRECTORY)|' '^state-directory: /var/lib/homemqtt'
edit "$config" 's|^    directory: accessories$|    directory: /usr/share/homemqtt/accessories   # the simulated home; remove for real accessories only|' 'directory: /usr/share/homemqtt/accessories'
edit "$config" '/^homeassistant:/,/^$/ s|^  enabled: true$|  enabled: false                  # true: Home Assistant discovery on the broker|' 'enabled: false                  # true: Home Assistant'
cp -r Config/accessories "$stage/usr/share/homemqtt/accessories"

unit="$stage/usr/lib/systemd/system/homemqtt.service"
{
    echo "# systemd unit of the homemqtt package. Settings of your own go in"
    echo "# /etc/systemd/system/homemqtt.service.d/*.conf (systemctl edit homemqtt), not here."
    sed -n '/^\[Unit\]/,$p' Examples/homemqtt.service
} >"$unit"
edit "$unit" 's|^ExecStart=/usr/local/bin/homemqtt |ExecStart=/usr/bin/homemqtt |' '^ExecStart=/usr/bin/homemqtt run'
chmod 0644 "$unit"

# The manual page, generated from the command's own --help by swift-argument-parser.
swift build -c release --static-swift-stdlib --scratch-path "$scratch" --product generate-manual
manual=$(mktemp -d)
"$scratch/release/generate-manual" "$binary" --output-directory "$manual"
gzip -9n <"$manual/homemqtt.1" >"$stage/usr/share/man/man1/homemqtt.1.gz"
rm -rf "$manual"

doc="$stage/usr/share/doc/homemqtt"
install -m 0644 README.md "$doc/README.md"
install -m 0644 Examples/*.sh Examples/node-red-flow.json "$doc/examples/"
install -m 0644 Packaging/copyright "$doc/copyright"

install -m 0644 Packaging/debian/conffiles "$stage/DEBIAN/conffiles"
install -m 0755 Packaging/debian/postinst Packaging/debian/prerm Packaging/debian/postrm "$stage/DEBIAN/"

# Depends: from the libraries the binary links, as dpkg-shlibdeps reads them.
shlib=$(mktemp -d)
mkdir -p "$shlib/debian"
printf 'Source: homemqtt\n\nPackage: homemqtt\nArchitecture: any\n' >"$shlib/debian/control"
depends=$(cd "$shlib" && dpkg-shlibdeps -O "$OLDPWD/$stage/usr/bin/homemqtt" 2>"$shlib/errors" | sed -n 's/^shlibs:Depends=//p') ||
    depends=
[ -n "$depends" ] || { echo "build-package: dpkg-shlibdeps found no dependencies:" >&2; cat "$shlib/errors" >&2; exit 1; }
# Packed relative relocations (Package.swift, `linkedCompactly`) need glibc 2.36's loader, which
# the binary asks for by the version GLIBC_ABI_DT_RELR: a version with no symbols, so
# dpkg-shlibdeps does not count it. Without this, Depends said libc6 (>= 2.35), and an older
# system would install a binary its loader refuses.
if readelf -V "$stage/usr/bin/homemqtt" | grep -q 'Name: GLIBC_ABI_DT_RELR'; then
    libc=$(printf '%s\n' "$depends" | grep -o 'libc6 (>= [^)]*)' | sed 's/libc6 (>= \(.*\))/\1/')
    if [ -z "$libc" ]; then
        depends="libc6 (>= 2.36), $depends"
    elif dpkg --compare-versions "$libc" lt 2.36; then
        depends=$(printf '%s\n' "$depends" | sed 's/libc6 (>= [^)]*)/libc6 (>= 2.36)/')
    fi
fi
rm -rf "$shlib"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@DEPENDS@|$depends|" -e "s|@INSTALLED_SIZE@|$size|" \
    Packaging/debian/control.in >"$stage/DEBIAN/control"

deb="dist/homemqtt_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null

# The tarball: the same binary, config, unit and accessories, for machines without dpkg.
tarroot="dist/stage/homemqtt-$version"
mkdir -p "$tarroot"
cp "$stage/usr/bin/homemqtt" "$tarroot/"
cp "$config" "$unit" "$tarroot/"
cp -r "$stage/usr/share/homemqtt/accessories" "$tarroot/"
cp "$doc/README.md" "$doc/copyright" "$tarroot/"
tarball="dist/homemqtt-$version-linux-$arch.tar.gz"
tar -C dist/stage --owner=0 --group=0 -czf "$tarball" "homemqtt-$version"
rm -rf dist/stage

echo "build-package: $deb ($(du -h "$deb" | cut -f1), Depends: $depends)"
echo "build-package: $tarball ($(du -h "$tarball" | cut -f1))"
