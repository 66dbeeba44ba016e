#!/usr/bin/env bash
# Puts what a GPU session runs into gpu-carry/ (ignored by git): plan, its CUDA backend, the GPU tests and
# the libfmt they load, as one xz archive, gpu-carry/bundle.tar.xz (about 15 MB; the files themselves are
# about 66 MB, most of it the kernels' code for sm_80 and sm_90, twice: the backend and the GPU tests link
# them each). A device machine gets a copy of the working tree of at most 64 MiB; name gpu-carry in the call's
# carry and run scripts/gpu_session.sh there, which unpacks the archive and finds the binaries. Run after a
# build (cmake -S . -B build && cmake --build build).
set -euo pipefail
cd "$(dirname "$0")/.."
for f in build/plan build/libtrainplan_cuda_backend.so build/tests/trainplan_gpu_tests; do
  [ -e "$f" ] || { echo "gpu_bundle.sh: $f is missing: build first (with nvcc found, for the CUDA backend)" >&2; exit 2; }
done
fmt_lib=$(ldd build/plan | awk '/libfmt/ { print $3 }')
if [ -z "$fmt_lib" ] || [ ! -e "$fmt_lib" ]; then echo "gpu_bundle.sh: build/plan does not name a libfmt it finds" >&2; exit 2; fi
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
mkdir -p "$staging/lib"
cp build/plan build/libtrainplan_cuda_backend.so build/tests/trainplan_gpu_tests "$staging/"
cp -L "$fmt_lib" "$staging/lib/"
rm -rf gpu-carry
mkdir -p gpu-carry
tar -cf - -C "$staging" . | xz -T0 -6 > gpu-carry/bundle.tar.xz
du -sh gpu-carry
