#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run.sh — install recap from its build tree and build a separate project against the install.
#
#   run.sh <recap build dir> <work dir> [config]
#
# Installs into <work dir>/prefix, checks that the installed librecap.so and librecap.a hold no
# test code (cmake/CheckNoTestCode.cmake), then builds and runs tests/consumer three ways:
# through find_package(recap CONFIG) with recap::recap_static, with recap::recap (shared, found
# through the rpath CMake sets), and, where pkg-config is installed, by hand from recap.pc
# --static. With CXX set (a C++ compiler), the builds also make and run consumer_cpp, the C++
# layer's program, and the pkg-config builds compile it too. Environment: CMAKE (the cmake to
# use), CMAKE_GENERATOR, CC and CXX are passed on to the builds; NM is the nm the check uses.
set -euo pipefail

build=$1
work=$2
config=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
cmake=${CMAKE:-cmake}
prefix=$work/prefix

step() { printf '\n== %s\n' "$*"; }

# Dynamic dependencies of a program, one name a line.
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

# The program must run, must not need libcuda, and needs librecap.so exactly when shared.
check_program() {
  local program=$1 link=$2
  "$program"
  local libs
  libs=$(needed "$program")
  if grep -q '^libcuda\.so' <<<"$libs"; then
    echo "FAIL: $program needs libcuda" >&2
    exit 1
  fi
  if [[ $link == shared ]] && ! grep -q '^librecap\.so' <<<"$libs"; then
    echo "FAIL: $program should need librecap.so; it needs: $libs" >&2
    exit 1
  fi
  if [[ $link == static ]] && grep -q '^librecap\.so' <<<"$libs"; then
    echo "FAIL: $program should not need librecap.so" >&2
    exit 1
  fi
}

rm -rf "$work"
mkdir -p "$work"

step "install $build into $prefix"
"$cmake" --install "$build" --prefix "$prefix" ${config:+--config "$config"}

step "the installed libraries hold no test code"
shared=$(find "$prefix" -name 'librecap.so' -print -quit)
static=$(find "$prefix" -name 'librecap.a' -print -quit)
if [[ -z $shared || -z $static ]]; then
  echo "FAIL: librecap.so or librecap.a is not installed under $prefix" >&2
  exit 1
fi
"$cmake" "-DLIBRARIES=$shared;$static" ${NM:+"-DNM=$NM"} -P "$here/../../cmake/CheckNoTestCode.cmake"

for link in static shared; do
  step "find_package(recap CONFIG), $link"
  dir=$work/build-$link
  "$cmake" -S "$here" -B "$dir" -DCMAKE_PREFIX_PATH="$prefix" -DRECAP_LINK="$link" \
    -DCMAKE_BUILD_TYPE=Release
  "$cmake" --build "$dir"
  check_program "$dir/consumer" "$link"
  if [[ -n ${CXX:-} || -e $dir/consumer_cpp ]]; then
    check_program "$dir/consumer_cpp" "$link"
  fi
done

if command -v pkg-config >/dev/null; then
  pc=$(find "$prefix" -name recap.pc -print -quit)
  export PKG_CONFIG_PATH=$(dirname "$pc")
  # pc_build <static|shared> <compiler> <source> <output> <flags...>: one program from recap.pc.
  pc_build() {
    local link=$1 compiler=$2 source=$3 output=$4
    shift 4
    local cflags libs=() flag
    read -ra cflags <<<"$(pkg-config --cflags recap)"
    if [[ $link == static ]]; then
      # -lrecap would pick librecap.so where both libraries are installed; name the archive.
      for flag in $(pkg-config --libs --static recap); do
        [[ $flag == -lrecap ]] && flag=-l:librecap.a
        libs+=("$flag")
      done
    else
      read -ra libs <<<"$(pkg-config --libs recap)"
      libs+=("-Wl,-rpath,$(pkg-config --variable=libdir recap)")
    fi
    "$compiler" "$@" "${cflags[@]}" "$source" -o "$output" "${libs[@]}"
    check_program "$output" "$link"
  }

  step "pkg-config --static: $(pkg-config --cflags --libs --static recap)"
  pc_build static "${CC:-cc}" "$here/main.c" "$work/consumer-pc-static" \
    -std=c11 -Wall -Wextra -Wpedantic -Werror
  step "pkg-config (shared): $(pkg-config --cflags --libs recap)"
  pc_build shared "${CC:-cc}" "$here/main.c" "$work/consumer-pc-shared" \
    -std=c11 -Wall -Wextra -Wpedantic -Werror
  if [[ -n ${CXX:-} ]]; then
    for link in static shared; do
      step "pkg-config ($link), the C++ layer with $CXX"
      pc_build "$link" "$CXX" "$here/main.cpp" "$work/consumer-pc-cpp-$link" \
        -std=c++17 -Wall -Wextra -Wpedantic -Werror
    done
  fi
else
  step "pkg-config not installed: recap.pc not checked"
fi

step "consumer: all builds ran"
