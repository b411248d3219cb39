# SPDX-License-Identifier: BSD-3-Clause
# tools/deps.sh — what recap's scripts (./test, ./demo, .ci/run) need from the machine, checked
# in one place. Sourced, not run. `recap_deps_ensure WHAT...` checks each thing named, and
# when some are missing either installs their Debian packages (when it runs as root on a
# machine with apt-get, as CI does) or prints the one command that installs them and returns 1.
#
# The names it knows, and the Debian package that brings each:
#   cmake       cmake (3.25 or newer, for the presets)     ninja     ninja-build
#   cc          gcc                                          c++       g++ (nvcc's host compiler)
#   binutils    binutils (nm, readelf: the library checks)  pkg-config pkg-config
#   cmocka      libcmocka-dev (the test framework)          cjson     libcjson-dev (tests, recap-graph)
#   valgrind, clang-format, chromium, clang (+ libFuzzer's runtime): the CI-only checks
# The CUDA toolkit is not a Debian package recap can install: it is looked for in
# /usr/local/cuda and on PATH, and its absence is reported with where to get it.

# Prints the Debian package for a name, or nothing when the name is present already.
recap__deps_missing_package() {
  case $1 in
    cmake)
      if ! command -v cmake >/dev/null 2>&1; then echo cmake; return; fi
      local v
      v=$(cmake --version 2>/dev/null | sed -n '1s/[^0-9]*\([0-9]*\.[0-9]*\).*/\1/p')
      if [ "$(printf '%s\n3.25\n' "$v" | sort -V | head -n 1)" != 3.25 ]; then echo cmake; fi ;;
    ninja) command -v ninja >/dev/null 2>&1 || echo ninja-build ;;
    cc) command -v gcc >/dev/null 2>&1 || echo gcc ;;
    c++) command -v g++ >/dev/null 2>&1 || echo g++ ;;
    binutils) command -v nm >/dev/null 2>&1 && command -v readelf >/dev/null 2>&1 || echo binutils ;;
    pkg-config) command -v pkg-config >/dev/null 2>&1 || echo pkg-config ;;
    cmocka) [ -e /usr/include/cmocka.h ] || pkg-config --exists cmocka 2>/dev/null || echo libcmocka-dev ;;
    cjson) [ -e /usr/include/cjson/cJSON.h ] || pkg-config --exists libcjson 2>/dev/null || echo libcjson-dev ;;
    valgrind) command -v valgrind >/dev/null 2>&1 || echo valgrind ;;
    clang-format) command -v clang-format >/dev/null 2>&1 || echo clang-format ;;
    chromium) command -v chromium >/dev/null 2>&1 || echo chromium ;;
    clang)
      command -v clang >/dev/null 2>&1 || echo clang
      # libFuzzer's runtime for the fuzz preset's clang.
      ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
        echo "libclang-rt-$(clang --version 2>/dev/null | sed -n '1s/.*version \([0-9]*\).*/\1/p' | grep . || echo 14)-dev" ;;
    *) echo "tools/deps.sh: unknown name '$1'" >&2; return 2 ;;
  esac
}

# Finds the CUDA toolkit and puts nvcc on PATH (CMake needs it to enable CUDA). Returns 1, with
# one line saying where to get it, when there is none.
recap_deps_cuda() {
  if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH=/usr/local/cuda/bin:$PATH
  fi
  if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null 2>&1; then
    echo "${RECAP_DEPS_WHO:-recap}: the CUDA toolkit (nvcc) was found neither in /usr/local/cuda nor on PATH; install it from https://developer.nvidia.com/cuda-downloads (or set CUDACXX)" >&2
    return 1
  fi
  if [ -z "${CUDACXX:-}" ]; then export CUDACXX; CUDACXX=$(command -v nvcc); fi
}

recap_deps_ensure() {
  local who=${RECAP_DEPS_WHO:-recap} name pkgs=() p
  for name in "$@"; do
    p=$(recap__deps_missing_package "$name") || return 2
    [ -n "$p" ] && pkgs+=($p)
  done
  [ ${#pkgs[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1 && [ -z "${RECAP_NO_INSTALL:-}" ]; then
    echo "$who: installing the Debian packages it needs: ${pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if apt-get update -qq && apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null; then
      return 0
    fi
    echo "$who: apt-get could not install ${pkgs[*]}" >&2
    return 1
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo "
  echo "$who: missing ${pkgs[*]}; install with: ${sudo}apt-get install -y ${pkgs[*]}" >&2
  return 1
}
