#!/usr/bin/env bash
# The lent GPU machine has no network and no RapidCheck. `ci/devdeps.sh pack` (here, after ci/deps.sh)
# copies RapidCheck's headers, static library and CMake package into .devdeps/ (git-ignored, carried);
# `ci/devdeps.sh install` (there, as root) puts them where find_package(rapidcheck) looks.
set -euo pipefail
cd "$(dirname "$0")/.."
lib=/usr/lib/x86_64-linux-gnu
case "${1:-}" in
  pack)
    rm -rf .devdeps && mkdir -p .devdeps/include .devdeps/lib .devdeps/cmake
    cp -r /usr/include/rapidcheck /usr/include/rapidcheck.h .devdeps/include/
    cp "$lib/librapidcheck.a" .devdeps/lib/
    cp -r "$lib/cmake/rapidcheck" .devdeps/cmake/ ;;
  install)
    [ -f /usr/include/rapidcheck.h ] && exit 0
    cp -r .devdeps/include/* /usr/include/
    cp .devdeps/lib/librapidcheck.a "$lib/"
    mkdir -p "$lib/cmake" && cp -r .devdeps/cmake/rapidcheck "$lib/cmake/" ;;
  *) echo "usage: ci/devdeps.sh pack|install" >&2; exit 2 ;;
esac
