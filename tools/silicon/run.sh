#!/usr/bin/env bash
# tools/silicon/run.sh: build the bundle's kernels and the driver with nvcc, run them on the GPU, pack the outputs.
#
#   tools/silicon/run.sh [BUNDLE [OUT]]        (defaults: tools/silicon/bundle, $OUT or /tmp/silicon_out)
#   BUILD_ONLY=1 tools/silicon/run.sh          build everything (a machine without a GPU: checks the shim)
#
# Needs nvcc and a CUDA GPU, no Python. Writes OUT/gpu_outputs.tar.gz.part00, ... (<kernel>.<arg>.bin,
# nofma/<kernel>.<arg>.bin, status.txt), OUT/build.log and OUT/env.txt. CUDA_ARCH (default sm_90, Hopper) and JOBS (default: cores) may be set.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
BUNDLE="$(cd "${1:-$HERE/bundle}" && pwd)"
OUTDIR="${2:-${OUT:-/tmp/silicon_out}}"
ARCH="${CUDA_ARCH:-sm_90}"
JOBS="${JOBS:-$(nproc)}"
BUILD="${BUILD_DIR:-/tmp/silicon_build}"
mkdir -p "$OUTDIR" "$BUILD/lib" "$BUILD/lib_nofma" "$BUILD/out/nofma"
NVCC="${NVCC:-nvcc}"
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  echo "nvcc $($NVCC --version | tail -1)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu /'
} > "$OUTDIR/env.txt"

# The kernel flags: those of testing/device_compilers/compile_kernels.py's nvcc check, plus -O3 (mcc's, see
# tilelang_musa/jit/toolchains.py) and a shared runtime. nvcc's default -fmad=true contracts a*b+c into an fma,
# as clang's CUDA default (-ffp-contract=fast) does for mcc.
# A second build with -fmad=false of the kernels in NOFMA tells contraction apart from other differences.
NOFMA="${NOFMA:-arith_float32 arith_float16 arith_bfloat16 scalar_arith_float32 scalar_arith_float16 scalar_arith_bfloat16}"
build_one() {
  local mu="$1" name lib="$2" flags="${3:-}"
  name="$(basename "$mu" .mu)"
  "$NVCC" -x cu -std=c++17 -O3 -arch="$ARCH" $flags -I"$REPO/src" -I"$HERE/cuda_musa" \
    -I"$REPO/testing/device_compilers/nvcc_musa" --pre-include "$HERE/cuda_musa/musa_predefined.h" \
    -D__MUSA_ARCH_LIST__=310 -shared -Xcompiler -fPIC -cudart shared -o "$BUILD/$lib/$name.so" "$mu" \
    > "$BUILD/$lib/$name.log" 2>&1 || { echo "BUILD FAIL $lib/$name"; cat "$BUILD/$lib/$name.log"; }
}
export -f build_one
export NVCC REPO HERE ARCH BUILD
start=$(date +%s)
"$NVCC" -std=c++17 -O2 -cudart shared -o "$BUILD/silicon_driver" "$HERE/driver.cpp" -ldl > "$OUTDIR/build.log" 2>&1 \
  || { cat "$OUTDIR/build.log"; exit 1; }
{ ls "$BUNDLE"/kernels/*.mu | sed 's/$/ lib/'
  for k in $NOFMA; do [ -f "$BUNDLE/kernels/$k.mu" ] && echo "$BUNDLE/kernels/$k.mu lib_nofma -fmad=false"; done
} | xargs -P "$JOBS" -L1 bash -c 'build_one "$0" "$1" "${2:-}"' >> "$OUTDIR/build.log" 2>&1
echo "built in $(( $(date +%s) - start )) s" | tee -a "$OUTDIR/build.log"
grep "BUILD FAIL" "$OUTDIR/build.log"
[ -n "${BUILD_ONLY:-}" ] && exit 0

rm -rf "$BUILD"/out/*.bin "$BUILD"/out/nofma/*
"$BUILD/silicon_driver" "$BUNDLE" "$BUILD/lib" "$BUILD/out"
rc=$?
cat "$BUILD/out/status.txt"
# shellcheck disable=SC2086
"$BUILD/silicon_driver" "$BUNDLE" "$BUILD/lib_nofma" "$BUILD/out/nofma" $NOFMA || rc=1
# The run tool returns files of at most 16 MiB: the archive comes back in 12 MiB parts
# (unpack with `cat gpu_outputs.tar.gz.part* | tar xzf - -C DIR`).
tar czf - -C "$BUILD/out" . | split -b 12M -d - "$OUTDIR/gpu_outputs.tar.gz.part"
exit $rc
