#!/usr/bin/env bash
# Install what the browser tests (pytest -m browser) need: Debian Chromium, its driver and
# fonts for Devanagari, Tamil and Telugu so Indic captions render in screenshots.
# Idempotent: apt-get skips packages that are already installed. Used by CI; run as root
# (or through sudo when it is available).
set -euo pipefail
PACKAGES=(chromium chromium-driver fonts-lohit-deva fonts-lohit-taml fonts-lohit-telu)
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "install_browser_deps.sh: run as root or install sudo" >&2; exit 1; fi
fi
missing=()
for package in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$package")
done
if [ "${#missing[@]}" -eq 0 ]; then
    echo "browser test dependencies already installed: ${PACKAGES[*]}"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
echo "install_browser_deps.sh: installing ${missing[*]} with apt-get (package lists first)"
$SUDO apt-get update
# What apt would do, said before it does it: the packages it adds and those it upgrades (a
# dependency of Chromium may need a newer systemd or libc, for instance).
plan=$($SUDO apt-get install -s -y "${missing[@]}" | awk '/^Inst / {
    if ($3 ~ /^\[/) print $2, "(upgrade from " substr($3, 2, length($3) - 2) ")"
    else print $2, "(new)" }')
echo "apt-get will install $(grep -c "(new)" <<<"$plan" || true) new package(s) and upgrade" \
     "$(grep -c "(upgrade" <<<"$plan" || true):"
sed 's/^/  /' <<<"$plan"
$SUDO apt-get install -y "${missing[@]}"
command -v chromium >/dev/null || { echo "chromium not on PATH after install" >&2; exit 1; }
echo "installed: ${missing[*]}"
