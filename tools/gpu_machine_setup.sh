#!/usr/bin/env bash
# Installs TensorFlow 2.21 on a lent GPU machine that has no TensorFlow and no
# package index, from the payload that tools/gpu_payload.py builds here and the
# device tool carries over in parts (each call carries at most 64 MiB):
#
#   tools/gpu_machine_setup.sh receive .gpu/part3     # one call per part: keeps it in $PAYLOAD
#   eval "$(tools/gpu_machine_setup.sh install)"      # after the last: unpack, install, export
#   bash benchmarks/gpu_check.sh --output_dir=$OUT
#
# `install` unpacks the stripped TensorFlow tree and the wheels into $SITE and
# prints the `export` lines for PYTHONPATH and LD_LIBRARY_PATH (so the caller
# evals them). That machine's image carries CUDA 13 libraries only; TF 2.21 is
# built against CUDA 12.5 and opens its libraries by their CUDA 12 names
# (libcublas.so.12, libcufft.so.11, ...). The CUDA 12 runtime (libcudart.so.12)
# comes in the payload; for every other library a link under the CUDA 12 name
# points at the CUDA 13 file, in the folder TF's RUNPATH searches
# ($SITE/nvidia/<lib>/lib). Whether each works is what the GPU check's env step
# then shows; the links are printed so its log says what was used.
set -u
PAYLOAD=${PAYLOAD:-/tmp/slimtrain_payload}
SITE=${SITE:-/tmp/slimtrain_site}
PYTHON=${PYTHON:-python3}
# Where the CUDA libraries are looked for (the image keeps them under all three).
CUDA_ROOTS=${CUDA_ROOTS:-/opt /usr /usr/local}
PROTOS_DIR=${PROTOS_DIR:-"$(cd "$(dirname "$0")/.." && pwd)/protos"}

receive() {
  mkdir -p "$PAYLOAD"
  cp -r "$1"/. "$PAYLOAD"/ || exit 1
  du -sh "$PAYLOAD" >&2
}

# The CUDA 12 name TF opens, the package folder its RUNPATH searches, the glob of
# the file to link to when that name is not on the machine.
CUDA_NAMES='
libcublas.so.12 cublas libcublas.so.*
libcublasLt.so.12 cublas libcublasLt.so.*
libcufft.so.11 cufft libcufft.so.*
libcusolver.so.11 cusolver libcusolver.so.*
libcusparse.so.12 cusparse libcusparse.so.*
libcurand.so.10 curand libcurand.so.*
libcupti.so.12 cuda_cupti libcupti.so.*
libnvJitLink.so.12 nvjitlink libnvJitLink.so.*
libcudnn.so.9 cudnn libcudnn.so.9*
libnccl.so.2 nccl libnccl.so.2*
'

find_library() {
  # The first real file (not one of our links) matching $1 under the usual roots.
  # shellcheck disable=SC2086
  find $CUDA_ROOTS -xdev -name "$1" -not -path "$SITE/*" \( -type f -o -type l \) \
    2>/dev/null | sort | head -1
}

link_cuda_libraries() {
  local libdirs=""
  while read -r name folder pattern; do
    [ -z "$name" ] && continue
    mkdir -p "$SITE/nvidia/$folder/lib"
    target="$SITE/nvidia/$folder/lib/$name"
    [ -e "$target" ] && continue
    found=$(find_library "$name")
    [ -z "$found" ] && found=$(find_library "$pattern")
    if [ -n "$found" ]; then
      ln -sf "$(readlink -f "$found")" "$target"
      echo "# $name -> $(readlink -f "$found")" >&2
      # The CUDA 13 library's own dependencies (libcublasLt.so.13 ...) live beside it.
      libdirs="$libdirs:$(dirname "$(readlink -f "$found")")"
    else
      echo "# $name: not found on this machine" >&2
    fi
  done <<< "$CUDA_NAMES"
  echo "$libdirs"
}

install() {
  mkdir -p "$SITE"
  local parts
  parts=$(ls "$PAYLOAD"/tf.tar.xz.part* 2>/dev/null | sort)
  [ -z "$parts" ] && { echo "no $PAYLOAD/tf.tar.xz.part*: receive the parts first" >&2; exit 1; }
  if command -v xz >/dev/null; then
    cat $parts | xz -dc -T0 | tar xf - -C "$SITE" || exit 1
  else
    cat $parts | "$PYTHON" -c "
import lzma, sys, tarfile
tarfile.open(fileobj=lzma.LZMAFile(sys.stdin.buffer), mode='r|').extractall('$SITE')" || exit 1
  fi
  # The compiled protos (grpcio-tools is not on that machine).
  cp "$PAYLOAD"/protos/*_pb2.py "$PROTOS_DIR"/ || exit 1
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" "$PAYLOAD"/deps/*.whl >&2 || exit 1
  local libdirs
  libdirs=$(link_cuda_libraries)
  echo "export PYTHONPATH=$SITE\${PYTHONPATH:+:\$PYTHONPATH}"
  # Every link folder too: TF opens cuSOLVER from libtensorflow_framework, whose
  # RUNPATH does not list nvidia/cusolver/lib (libtensorflow_cc's does).
  local linkdirs
  linkdirs=$(ls -d "$SITE"/nvidia/*/lib | tr '\n' ':')
  # Each folder once (several CUDA 13 libraries live in one).
  local path
  path=$(echo "${linkdirs%:}${libdirs}" | tr ':' '\n' | awk 'NF && !seen[$0]++' | paste -sd:)
  echo "export LD_LIBRARY_PATH=${path}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
  # XLA compiles its own PTX with ptxas and links libdevice: CUDA 13's, where it is.
  local nvcc
  nvcc=$(command -v nvcc || find_library nvcc)
  [ -n "$nvcc" ] && echo "export PATH=$(dirname "$nvcc"):\$PATH" \
    && echo "export XLA_FLAGS=--xla_gpu_cuda_data_dir=$(dirname "$(dirname "$nvcc")")"
}

case "${1:-}" in
  receive) receive "$2" ;;
  install) install ;;
  *) echo "usage: $0 receive DIR | install" >&2; exit 2 ;;
esac
