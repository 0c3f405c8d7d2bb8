#!/usr/bin/env bash
# The lent GPU machine has no network and lacks some of what ci/deps.sh installs. `ci/devdeps.sh pack` (here,
# after ci/deps.sh) copies into .devdeps/ (git-ignored, carried): RapidCheck's headers, static library and CMake
# package; CLI11's and nlohmann-json's headers and CMake packages (both header-only). `ci/devdeps.sh install`
# (there, as root) puts each one that is missing where find_package looks: headers in /usr/include, packages in
# the directories they came from (their config files locate the headers relative to themselves).
set -euo pipefail
cd "$(dirname "$0")/.."
usage() {
  cat <<'USAGE'
usage: ci/devdeps.sh pack|install
  pack     copy RapidCheck, CLI11 and nlohmann-json (headers, libraries, CMake packages) into .devdeps/
  install  as root on a machine without network: install from .devdeps/ whatever of them is missing
USAGE
}
lib=/usr/lib/x86_64-linux-gnu
share=/usr/share/cmake
case "${1:-}" in
  pack)
    rm -rf .devdeps && mkdir -p .devdeps/include .devdeps/lib .devdeps/cmake .devdeps/share-cmake
    cp -r /usr/include/rapidcheck /usr/include/rapidcheck.h .devdeps/include/
    cp "$lib/librapidcheck.a" .devdeps/lib/
    cp -r "$lib/cmake/rapidcheck" .devdeps/cmake/
    cp -r /usr/include/CLI /usr/include/nlohmann .devdeps/include/
    cp -r "$share/CLI11" "$share/nlohmann_json" .devdeps/share-cmake/ ;;
  install)
    if [ ! -f /usr/include/rapidcheck.h ]; then
      cp -r .devdeps/include/rapidcheck .devdeps/include/rapidcheck.h /usr/include/
      cp .devdeps/lib/librapidcheck.a "$lib/"
      mkdir -p "$lib/cmake" && cp -r .devdeps/cmake/rapidcheck "$lib/cmake/"
    fi
    mkdir -p "$share"
    if [ ! -f "$share/CLI11/CLI11Config.cmake" ]; then
      cp -r .devdeps/include/CLI /usr/include/ && cp -r .devdeps/share-cmake/CLI11 "$share/"
    fi
    if [ ! -f "$share/nlohmann_json/nlohmann_jsonConfig.cmake" ]; then
      cp -r .devdeps/include/nlohmann /usr/include/ && cp -r .devdeps/share-cmake/nlohmann_json "$share/"
    fi ;;
  -h|--help) usage ;;
  *) usage >&2; exit 2 ;;
esac
