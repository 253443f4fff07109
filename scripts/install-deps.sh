#!/usr/bin/env bash
# Installs the Debian packages strata needs to build and test, if any are missing. A CUDA
# toolkit is optional and not installed here: without one, strata builds everything but the GPU
# runtime, and `make test` leaves out the tests that need nvcc (README, "Quick start").
# Safe to run repeatedly: it does nothing when everything is present.
set -euo pipefail

packages=(cmake g++ make ccache libgtest-dev libgmock-dev nlohmann-json3-dev libcli11-dev libz3-dev graphviz
          time)  # GNU time: bench/suite_search.py and its test
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo_cmd=(sudo); else
    echo "install-deps: missing packages (${missing[*]}) and not root; install them and retry" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
