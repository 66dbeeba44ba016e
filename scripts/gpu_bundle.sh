#!/usr/bin/env bash
# Puts what a GPU session runs into gpu-carry/ (ignored by git): plan, its CUDA backend, the GPU tests and
# the libfmt they load, about 25 MB. A device machine gets a copy of the working tree of at most 64 MiB, and
# build/ alone is larger; name gpu-carry in the call's carry and run scripts/gpu_session.sh there, which
# finds it. Run after a build (cmake -S . -B build && cmake --build build).
set -euo pipefail
cd "$(dirname "$0")/.."
for f in build/plan build/libtrainplan_cuda_backend.so build/tests/trainplan_gpu_tests; do
  [ -e "$f" ] || { echo "gpu_bundle.sh: $f is missing: build first (with nvcc found, for the CUDA backend)" >&2; exit 2; }
done
fmt_lib=$(ldd build/plan | awk '/libfmt/ { print $3 }')
if [ -z "$fmt_lib" ] || [ ! -e "$fmt_lib" ]; then echo "gpu_bundle.sh: build/plan does not name a libfmt it finds" >&2; exit 2; fi
rm -rf gpu-carry
mkdir -p gpu-carry/lib
cp build/plan build/libtrainplan_cuda_backend.so build/tests/trainplan_gpu_tests gpu-carry/
cp -L "$fmt_lib" gpu-carry/lib/
du -sh gpu-carry
