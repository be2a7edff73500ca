#!/usr/bin/env bash
# Debian packages the test suite needs: a C/C++ toolchain and CMake (llama.cpp builds), clang
# (the patch verifier type-checks the Metal kernels as C++), Chromium and its driver (the browser
# test), PostgreSQL/Redis client tools, and ICU with pkg-config (PyICU builds against them).
# Installs only what is missing; needs root or sudo.
set -euo pipefail
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v g++ >/dev/null || need+=(g++)
command -v git >/dev/null || need+=(git)
command -v patch >/dev/null || need+=(patch)
command -v clang++ >/dev/null || ls /usr/bin/clang++-* >/dev/null 2>&1 || need+=(clang)
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
command -v pg_isready >/dev/null || need+=(postgresql-client)
command -v redis-cli >/dev/null || need+=(redis-tools)
command -v pkg-config >/dev/null || need+=(pkg-config)
pkg-config --exists icu-uc 2>/dev/null || need+=(libicu-dev)  # PyICU builds against it (handle skeletons)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
echo "system dependencies present"
