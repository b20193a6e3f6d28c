#!/usr/bin/env bash
# Installs what Porthole needs on a Debian machine, only what is missing: the system
# packages (bubblewrap, Xvfb, Chromium, podman, PostgreSQL, X headers) and the npm packages.
set -euo pipefail
cd "$(dirname "$0")/../.."

# Runtime: what the gateway and the agents' sandboxes use.
# The desktop surface: Xvfb, a window manager and a terminal for it, TurboJPEG (capture and encode),
# libX11/libXtst (input replay).
runtime_pkgs=(bubblewrap slirp4netns iproute2 util-linux xvfb chromium fonts-dejavu-core procps bash coreutils ca-certificates nodejs npm
	libturbojpeg0 libx11-6 libxtst6 openbox xterm)
# Building the binary (make run builds it): cgo for the desktop's TurboJPEG encoder and input replay.
build_pkgs=(gcc libc6-dev libx11-dev libxtst-dev libpng-dev libturbojpeg0-dev)
# Development and tests: container engine, database, setpriv/runuser, the benchmarks' peers.
dev_pkgs=(podman runc postgresql curl xclip x11vnc websockify novnc xdotool)

want=("${runtime_pkgs[@]}" "${build_pkgs[@]}")
[ "${1:-}" = "--dev" ] && want+=("${dev_pkgs[@]}")

missing=()
for p in "${want[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# A machine may already have node/npm from elsewhere.
if command -v npm >/dev/null 2>&1; then
	missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
read -r -a missing <<<"${missing[*]}"

if [ ${#missing[@]} -gt 0 ]; then
	echo "deps: installing Debian packages: ${missing[*]}"
	sudo=""
	[ "$(id -u)" -ne 0 ] && sudo="sudo"
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
else
	echo "deps: Debian packages present"
fi

# slirp4netns (network "full" of bwrap agents) opens /dev/net/tun as the gateway's user: Debian's
# udev makes it 0666, machines without udev (containers, CI) leave it 0600 root.
if [ -c /dev/net/tun ] && [ "$(stat -c %a /dev/net/tun)" != 666 ]; then
	echo "deps: chmod 0666 /dev/net/tun (slirp4netns run by an unprivileged gateway)"
	sudo=""
	[ "$(id -u)" -ne 0 ] && sudo="sudo"
	$sudo chmod 0666 /dev/net/tun
fi

# playwright-core (dev): the browser surface's Playwright-over-CDP e2e test; no browser download.
if [ ! -d node_modules/@xterm/xterm ] || [ ! -d node_modules/playwright-core ]; then
	echo "deps: installing npm packages (npm ci)"
	npm ci --no-audit --no-fund --loglevel=error
fi
