#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# launch.sh — start dp_mlp once per GPU, one rank per process, and wait for them all.
#
#   launch.sh [--ranks N] [--min-ranks M] [--program PATH] [-- DP_MLP_ARGS...]
#
#   --ranks N      processes to start (default: every GPU of the machine, as nvidia-smi or
#                  CUDA_VISIBLE_DEVICES count them; 1 when none is found)
#   --min-ranks M  fewer GPUs than M: say so and exit 77, "skipped" (default: no minimum)
#   --program P    the dp_mlp binary (default $DP_MLP, else the one beside this script, else
#                  build/examples/dp_mlp/dp_mlp under the source tree)
#
# Rank r runs on GPU r with RECAP_DP_RANK=r, RECAP_DP_WORLD=N and RECAP_DP_ID_FILE, a file in a
# fresh temporary folder through which rank 0 hands NCCL's unique id to the others. Rank 0's
# output comes as it is, the others' prefixed with "[rank r]". When a rank fails, the others
# (which may be waiting for it inside NCCL) are stopped. Exit status: 0 when every rank
# succeeded, 77 when every rank skipped, else the first failure's status.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ranks=""
min_ranks=0
program=${DP_MLP:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks=${2:?--ranks needs a number}; shift 2 ;;
    --min-ranks) min_ranks=${2:?--min-ranks needs a number}; shift 2 ;;
    --program) program=${2:?--program needs a path}; shift 2 ;;
    --) shift; break ;;
    -h | --help) sed -n '3,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "launch.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done

if [ -z "$program" ]; then
  for candidate in "$here/dp_mlp" "$here/../../build/examples/dp_mlp/dp_mlp"; do
    if [ -x "$candidate" ]; then program=$candidate; break; fi
  done
fi
if [ -z "$program" ] || [ ! -x "$program" ]; then
  echo "launch.sh: no dp_mlp binary (build the project, or give --program)" >&2
  exit 2
fi

gpus=0
if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
  if [ -n "$CUDA_VISIBLE_DEVICES" ]; then
    gpus=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
  fi
elif command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
fi
if [ -z "$ranks" ]; then
  ranks=$gpus
  [ "$ranks" -ge 1 ] || ranks=1
fi
if ! [ "$ranks" -ge 1 ] 2>/dev/null || ! [ "$min_ranks" -ge 0 ] 2>/dev/null; then
  echo "launch.sh: --ranks takes a positive number, --min-ranks a number" >&2
  exit 2
fi
if [ "$gpus" -lt "$min_ranks" ]; then
  echo "launch.sh: needs $min_ranks GPUs, found $gpus: skipped"
  exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/dp_mlp.XXXXXX") || exit 1
pids=()
stop_all() {
  for pid in "${pids[@]}"; do
    pkill -TERM -P "$pid" 2>/dev/null # a rank's program and its output filter
    kill -TERM "$pid" 2>/dev/null
  done
}
trap 'stop_all; rm -rf "$work"; exit 130' INT TERM

for ((r = 0; r < ranks; r++)); do
  (
    set -o pipefail
    export RECAP_DP_RANK=$r RECAP_DP_WORLD=$ranks RECAP_DP_ID_FILE="$work/nccl-id"
    if [ "$r" -eq 0 ]; then
      exec "$program" "$@"
    fi
    "$program" "$@" 2>&1 | sed -u "s/^/[rank $r] /"
  ) &
  pids+=("$!")
done

# Wait for every rank; the first failure stops the others.
status=0
skipped=0
left=$ranks
declare -A done_
while [ "$left" -gt 0 ]; do
  for i in "${!pids[@]}"; do
    pid=${pids[$i]}
    [ -z "${done_[$i]:-}" ] || continue
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"
      rc=$?
      done_[$i]=1
      left=$((left - 1))
      if [ "$rc" -eq 77 ]; then
        skipped=$((skipped + 1))
      elif [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then
        status=$rc
        if [ "$left" -gt 0 ]; then
          echo "launch.sh: rank $i exited with status $rc; stopping the other ranks" >&2
        fi
        stop_all
      fi
    fi
  done
  [ "$left" -eq 0 ] || sleep 0.2
done
rm -rf "$work"
if [ "$status" -eq 0 ] && [ "$skipped" -eq "$ranks" ]; then exit 77; fi
exit "$status"
