#!/usr/bin/env bash
# Installs what flashcheck needs and is missing, idempotently (apt). Called by ci/test.sh and ci/verify.sh.
# The CUDA toolkit is not installed here: without nvcc the build is CPU-only and GPU tests skip.
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  echo "usage: bash ci/deps.sh   (installs the missing Debian packages flashcheck builds with; sudo when not root)"
  exit 0
fi
need=()
for pkg in cmake ninja-build g++ libgtest-dev librapidcheck-dev libboost-dev libcli11-dev nlohmann-json3-dev clang libclang-rt-dev python3 python3-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
  echo "flashcheck deps: installing ${need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
# pytest, for the pytest entry point's test (subjects/python/flashcheck_pytest.py); PyPI, into the user's python3.
if ! python3 -c "import pytest" >/dev/null 2>&1; then
  echo "flashcheck deps: installing pytest (pip)"
  python3 -m pip install --quiet --disable-pip-version-check pytest ||
    python3 -m pip install --quiet --disable-pip-version-check --user pytest ||
    echo "flashcheck deps: pytest could not be installed: ctest pytest_subject skips" >&2
fi
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "flashcheck deps: add /usr/local/cuda/bin to PATH for the CUDA build" >&2
fi
