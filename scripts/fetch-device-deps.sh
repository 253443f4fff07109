#!/usr/bin/env bash
# Fetches the Debian packages that scripts/gpu-check.sh needs on a GPU machine that lacks them
# (and has no network): run it here, then carry the ignored folder .devdeps/ with the repo.
# Also the Python wheels scripts/gpu-python.sh needs to build the package there.
# It downloads the .deb files with `apt-get download` and unpacks them with `dpkg -x`, so
# headers land in .devdeps/usr/include, libraries in .devdeps/usr/lib/x86_64-linux-gnu and
# CMake package configs under .devdeps/usr/{lib/x86_64-linux-gnu,share}/cmake.
set -euo pipefail
cd "$(dirname "$0")/.."

# Build dependencies of strata (CMakeLists.txt): JSON, CLI, GoogleTest (prebuilt static
# libraries; its CMake config also names the gmock libraries) and Z3 with its runtime library.
packages=(nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libz3-dev libz3-4)

dest=.devdeps
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download "${packages[@]}")
rm -rf "$dest"
mkdir -p "$dest"
for deb in "$tmp"/*.deb; do
  dpkg -x "$deb" "$dest"
  echo "unpacked $(basename "$deb")"
done
rm -rf "$dest/usr/share/doc" "$dest/usr/share/man"
# The Python package's build tools and test runner (scripts/gpu-python.sh installs them offline;
# PyTorch and NumPy come with the GPU machine's Python).
python3 -m pip download -q -d "$dest/wheels" "scikit-build-core>=0.10" "nanobind>=2.0" pytest
du -sh "$dest"
