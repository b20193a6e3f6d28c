#!/bin/sh
# build.sh [TAG] — build Porthole's agent image (sh, bash, coreutils, procps,
# Xvfb, Chromium, fonts) from the Debian packages installed on this host and
# `podman import` it as TAG (default porthole-agent:latest).
#
# No registry is needed: the root filesystem is the dependency closure of the
# packages below, copied file by file from the host (dpkg -L), plus a minimal
# /etc (passwd/group with root and agent only, no host secrets).
#
# Environment: PODMAN (default podman), PODMAN_FLAGS (e.g. "--url unix:///run/x.sock"),
# KEEP_TARBALL=path to keep the root filesystem tarball.
set -eu

TAG=${1:-porthole-agent:latest}
PODMAN=${PODMAN:-podman}
PODMAN_FLAGS=${PODMAN_FLAGS:-}

PACKAGES="base-files dash bash coreutils procps findutils grep sed util-linux
  libc-bin xvfb xkb-data x11-xkb-utils x11-utils x11-xserver-utils xauth
  chromium chromium-common
  fontconfig fontconfig-config fonts-dejavu-core fonts-liberation xfonts-base
  ca-certificates netbase tzdata"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM

installed() { dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null | grep -qx installed; }

# Dependency closure over Depends and Pre-Depends of installed packages; of
# alternatives ("a | b") the first installed one is taken.
: >"$work/seen"
queue=""
for p in $PACKAGES; do
	if installed "$p"; then queue="$queue $p"; else echo "build.sh: skipping $p (not installed)" >&2; fi
done
while [ -n "$(echo $queue)" ]; do
	next=""
	for p in $queue; do
		grep -qx "$p" "$work/seen" && continue
		echo "$p" >>"$work/seen"
		deps=$(dpkg-query -W -f='${Depends}, ${Pre-Depends}' "$p" 2>/dev/null || true)
		# one dependency (with its alternatives) per line
		echo "$deps" | tr ',' '\n' | while IFS= read -r dep; do
			[ -n "$(echo $dep)" ] || continue
			echo "$dep" | tr '|' '\n' | while IFS= read -r alt; do
				name=$(echo "$alt" | sed -e 's/(.*)//' -e 's/\[.*\]//' -e 's/:any//' -e 's/ //g')
				[ -n "$name" ] || continue
				if installed "$name"; then echo "$name"; break; fi
			done
		done >"$work/deps"
		next="$next $(cat "$work/deps" | tr '\n' ' ')"
	done
	queue=$next
done
echo "build.sh: $(wc -l <"$work/seen") packages" >&2

# Files of those packages, with merged-usr paths canonicalised (/bin/x → /usr/bin/x).
while IFS= read -r p; do dpkg -L "$p" 2>/dev/null || true; done <"$work/seen" |
	sed -e 's#^/bin/#/usr/bin/#' -e 's#^/sbin/#/usr/sbin/#' -e 's#^/lib/#/usr/lib/#' -e 's#^/lib64/#/usr/lib64/#' |
	grep -v -e '^/etc/passwd$' -e '^/etc/group$' -e '^/etc/shadow$' -e '^/etc/gshadow$' |
	sort -u | while IFS= read -r f; do
	if [ -L "$f" ] || [ -f "$f" ]; then echo "${f#/}"; fi
done >"$work/files"
# Alternatives' symlinks (e.g. /etc/alternatives/x-www-browser) and the font cache.
find /etc/alternatives -maxdepth 1 -type l | sed 's#^/##' >>"$work/files"
[ -d /var/cache/fontconfig ] && find /var/cache/fontconfig -type f | sed 's#^/##' >>"$work/files"
sort -u -o "$work/files" "$work/files"
echo "build.sh: $(wc -l <"$work/files") files" >&2

root="$work/root"
mkdir -p "$root"
# Host files first (no recursion: only what the packages own), then the skeleton over them.
tar -C / --no-recursion -cf - -T "$work/files" | tar -C "$root" -xpf -
mkdir -p "$root/etc" "$root/home/agent" "$root/tmp" "$root/root" "$root/opt/porthole" "$root/run" "$root/var/tmp" "$root/dev" "$root/proc" "$root/sys" "$root/usr/bin" "$root/usr/lib" "$root/usr/lib64" "$root/usr/sbin"
chmod 1777 "$root/tmp" "$root/var/tmp"
for d in bin sbin lib lib64; do
	rm -rf "${root:?}/$d"
	ln -s "usr/$d" "$root/$d"
done
cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/bash
agent:x:1000:1000:agent:/home/agent:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
agent:x:1000:
nogroup:x:65534:
EOF
cat >"$root/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
EOF
echo "127.0.0.1 localhost" >"$root/etc/hosts"
echo porthole-agent >"$root/etc/hostname"

tarball="$work/rootfs.tar"
tar -C "$root" -cf "$tarball" .
echo "build.sh: rootfs $(du -h "$tarball" | cut -f1)" >&2
if [ -n "${KEEP_TARBALL:-}" ]; then cp "$tarball" "$KEEP_TARBALL"; fi

# shellcheck disable=SC2086
$PODMAN $PODMAN_FLAGS import \
	--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
	--change 'ENV HOME=/home/agent' \
	--change 'WORKDIR /home/agent' \
	--change 'CMD ["/bin/sh"]' \
	"$tarball" "$TAG" >/dev/null
echo "build.sh: imported $TAG" >&2
