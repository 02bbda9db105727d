#!/usr/bin/env bash
# Debian packages the full test suite uses: chromium (browser end-to-end test) and
# dataset-fashion-mnist (real-data tests). Installs what is missing when run as root or with sudo;
# otherwise says what to install (those tests then skip and print why).
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[ -e /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ] || missing+=(dataset-fashion-mnist)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "note: install ${missing[*]} (apt-get install ${missing[*]}) to run the browser and real-data tests" >&2
fi
