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

PACKAGES="base-files dash bash coreutils procps findutils grep sed mawk util-linux debianutils
  bsdutils ncurses-base ncurses-bin less
  libc-bin xvfb xkb-data x11-xkb-utils x11-utils x11-xserver-utils xauth
  libturbojpeg0 libx11-6 libxtst6 openbox xterm xclip
  chromium chromium-common
  fontconfig fontconfig-config fonts-dejavu-core fonts-liberation xfonts-base
  ca-certificates netbase tzdata"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM

# Dependency closure over Depends and Pre-Depends of the installed packages, in one pass over
# dpkg's database: of alternatives ("a | b") the first installed one is taken; a virtual package
# resolves to an installed package that Provides it.
dpkg-query -W -f='${db:Status-Status}\t${Package}\t${Provides}\t${Depends}, ${Pre-Depends}\n' >"$work/db"
awk -F'\t' -v roots="$PACKAGES" '
function clean(s) { sub(/\(.*\)/, "", s); sub(/\[.*\]/, "", s); gsub(/[ \n]/, "", s); sub(/:.*/, "", s); return s }
function resolve(n) { if (n in inst) return n; if (n in prov) return prov[n]; return "" }
function visit(p,    d, n, i, alts, m, j, r) {
	if (p in seen) return
	seen[p] = 1
	print p
	n = split(deps[p], d, ",")
	for (i = 1; i <= n; i++) {
		m = split(d[i], alts, "|")
		for (j = 1; j <= m; j++) {
			r = clean(alts[j])
			if (r == "") continue
			r = resolve(r)
			if (r != "") { visit(r); break }
		}
	}
}
$1 == "installed" {
	inst[$2] = 1
	deps[$2] = $4
	n = split($3, pv, ",")
	for (i = 1; i <= n; i++) { v = clean(pv[i]); if (v != "" && !(v in prov)) prov[v] = $2 }
}
END {
	n = split(roots, rs, " ")
	for (i = 1; i <= n; i++) {
		r = resolve(rs[i])
		if (r == "") print "build.sh: skipping " rs[i] " (not installed)" > "/dev/stderr"
		else visit(r)
	}
}' "$work/db" >"$work/seen"
echo "build.sh: $(wc -l <"$work/seen") packages" >&2

# Files of those packages, with merged-usr paths canonicalised (/bin/x → /usr/bin/x).
# shellcheck disable=SC2046
dpkg -L $(cat "$work/seen") 2>/dev/null |
	sed -e 's#^/bin/#/usr/bin/#' -e 's#^/sbin/#/usr/sbin/#' -e 's#^/lib/#/usr/lib/#' -e 's#^/lib64/#/usr/lib64/#' |
	grep -v -e '^/etc/passwd$' -e '^/etc/group$' -e '^/etc/shadow$' -e '^/etc/gshadow$' |
	sort -u | while IFS= read -r f; do
	if [ -L "$f" ] || [ -f "$f" ]; then echo "${f#/}"; fi
done >"$work/files"
# Alternatives' symlinks (e.g. /etc/alternatives/x-www-browser) and the font cache.
# (and the links update-alternatives made in /usr/bin and /usr/sbin, which no package owns).
find /etc/alternatives -maxdepth 1 -type l | sed 's#^/##' >>"$work/files"
find /usr/bin /usr/sbin -maxdepth 1 -lname '/etc/alternatives/*' | sed 's#^/##' >>"$work/files"
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
previous=$($PODMAN $PODMAN_FLAGS images -q "$TAG" 2>/dev/null || true)
# shellcheck disable=SC2086
$PODMAN $PODMAN_FLAGS import \
	--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
	--change 'ENV HOME=/home/agent' \
	--change 'WORKDIR /home/agent' \
	--change 'CMD ["/bin/sh"]' \
	--change "LABEL porthole.recipe=$(sha256sum "$0" | cut -c1-16)" \
	"$tarball" "$TAG" >/dev/null
echo "build.sh: imported $TAG" >&2
# The image this one replaces, unless a container still uses it.
# shellcheck disable=SC2086
[ -z "$previous" ] || $PODMAN $PODMAN_FLAGS rmi "$previous" >/dev/null 2>&1 || true
