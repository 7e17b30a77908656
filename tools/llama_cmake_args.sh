#!/bin/sh
# The CMake flags `make install` builds llama-cpp-python with, for the CPU it runs on.
#
# GGML_NATIVE=ON would also build llama.cpp's AMX kernels, which segfault on first decode on
# this project's VMs, so the instruction sets are named one by one instead, AMX always off:
# AVX2/FMA/F16C always (the baseline), AVX-512 (F, CD, VL, DQ, BW: what GGML_AVX512 compiles
# for), VBMI, VNNI, BF16 and AVX-VNNI only where /proc/cpuinfo lists them. AVX-512 makes the
# bundled generator's prefill about 1.5x faster on these CPUs (bench/README.md, "CPU speed").
# MEDR2_LLAMA_BASELINE=1 keeps the baseline (a build to copy to older CPUs).
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { for f in "$@"; do case "$flags" in *" $f "*) ;; *) return 1 ;; esac; done; }
args="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
if [ "${MEDR2_LLAMA_BASELINE:-0}" != 1 ] && has avx512f avx512cd avx512vl avx512dq avx512bw; then
  args="$args -DGGML_AVX512=ON"
  has avx512vbmi && args="$args -DGGML_AVX512_VBMI=ON"
  has avx512_vnni && args="$args -DGGML_AVX512_VNNI=ON"
  has avx512_bf16 && args="$args -DGGML_AVX512_BF16=ON"
else
  args="$args -DGGML_AVX512=OFF"
fi
has avx_vnni && [ "${MEDR2_LLAMA_BASELINE:-0}" != 1 ] && args="$args -DGGML_AVX_VNNI=ON"
echo "$args -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
