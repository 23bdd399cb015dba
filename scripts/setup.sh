#!/usr/bin/env bash
# Installs every Debian package Loom needs to build, test and run. Idempotent:
# when everything is present it only checks and returns.
set -euo pipefail

PACKAGES=(
  # toolchain
  cmake ninja-build ccache g++ git mold
  # MLIR / LLVM 22 (linked through libMLIR.so), lit and FileCheck
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  # ONNX front end (protobuf first, then ONNX)
  libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata
  # runtime: oneDNN (its CMake package needs the OpenCL files), MPI
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers libopenmpi-dev openmpi-bin
  # tests
  libgtest-dev googletest
  # loom run's and loom-run's command line, checkpoint manifests (header-only);
  # checkpoint checksums (CRC-32)
  libcli11-dev nlohmann-json3-dev zlib1g-dev
  # model export and the PyTorch oracle
  python3-torch python3-onnx python3-numpy python3-torchvision
  # the Python package (python/): its extension and its tests
  pybind11-dev python3-pybind11 python3-dev python3-pytest
  python3-pip python3-setuptools python3-wheel
  # the benchmarks' PyTorch peer uses OpenBLAS (see ../shared/REFERENCES.md)
  libopenblas0-pthread
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
