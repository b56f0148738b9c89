r"""Builds the payload that brings TensorFlow to a lent GPU machine, in parts.

The lent GPU machine (see docs/developing.md, "The GPU check") has Python 3.12,
CUDA 13 and PyTorch, but no TensorFlow and no package index, and each call of
the device tool carries at most 64 MiB. TF 2.21's wheel is 573 MB. This script,
run here (where pip reaches the index), makes it fit:

    python tools/gpu_payload.py --out .gpu          # .gpu/part1 ... .gpu/partN

  * the cp312 TensorFlow wheel is unpacked without `include/` (C++ headers) and
    with its shared libraries stripped of their static symbol tables (the
    dynamic ones stay): 1.9 GB -> 1.2 GB;
  * that tree is packed as one tar.xz (`xz -9`), split into parts that fit a
    call beside the working tree;
  * the pure-Python and cp312 wheels our code imports (the versions of this
    checkout's .venv) and the CUDA 12 runtime (libcudart.so.12, 3.5 MB) go in
    a last part of their own, with the compiled protos.

On the machine, one device call per part runs
`tools/gpu_machine_setup.sh receive .gpu/partK` (carrying `.gpu/partK`), and
the last one `eval "$(tools/gpu_machine_setup.sh install)"` before the check.
Add `/.gpu/` to .git/info/exclude first, so the parts travel only when carried.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

TF_REQUIREMENT = 'tensorflow==2.21.0'
# What our code imports beside TensorFlow, at the versions tested here.
WHEELS = ('absl-py==2.5.1 astunparse==1.6.3 flatbuffers==25.12.19 gast==0.7.0 '
          'google-pasta==0.2.0 grpcio==1.85.3 h5py==3.14.0 keras==3.15.1 ml_dtypes==0.6.0 '
          'namex==0.1.0 numpy==2.4.6 opt_einsum==3.4.0 optree==0.20.0 protobuf==7.36.2 '
          'pycocotools==2.0.11 six==1.17.0 termcolor==3.3.0 tf-slim==1.1.0 tf_keras==2.21.0 '
          'typing_extensions==4.16.0 wrapt==2.5.2 nvidia-cuda-runtime-cu12==12.9.79').split()
PLATFORMS = ('manylinux_2_28_x86_64', 'manylinux_2_27_x86_64', 'manylinux_2_17_x86_64',
             'manylinux2014_x86_64', 'manylinux_2_5_x86_64', 'manylinux1_x86_64')
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def download(requirements, folder):
  """pip-downloads cp312 x86-64 wheels of `requirements` (no dependencies) into `folder`."""
  command = [sys.executable, '-m', 'pip', 'download', '-q', '--no-deps', '--only-binary=:all:',
             '--python-version', '3.12', '--implementation', 'cp', '-d', folder]
  for platform in PLATFORMS:
    command += ['--platform', platform]
  subprocess.run(command + list(requirements), check=True)


def stripped_tensorflow_tree(wheel, folder):
  """Unpacks `wheel` into `folder` without headers, its .so files stripped."""
  with zipfile.ZipFile(wheel) as archive:
    archive.extractall(folder, [name for name in archive.namelist()
                                if not name.startswith('tensorflow/include/')])
  libraries = [os.path.join(root, name) for root, _, names in os.walk(folder)
               for name in names if name.endswith('.so') or '.so.' in name]
  subprocess.run(['strip', '--strip-unneeded'] + libraries, check=True)


def split(path, part_bytes, out):
  """Splits `path` into out/partK/tf.tar.xz.partKKK of at most `part_bytes`; returns K."""
  count = 0
  with open(path, 'rb') as source:
    while True:
      chunk = source.read(part_bytes)
      if not chunk:
        return count
      count += 1
      folder = os.path.join(out, 'part%d' % count)
      os.makedirs(folder, exist_ok=True)
      with open(os.path.join(folder, 'tf.tar.xz.part%03d' % count), 'wb') as target:
        target.write(chunk)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, '.gpu'))
  parser.add_argument('--part_mib', type=int, default=57,
                      help='Bytes of TensorFlow per part (the working tree travels too).')
  args = parser.parse_args(argv)
  shutil.rmtree(args.out, ignore_errors=True)
  os.makedirs(args.out)
  with tempfile.TemporaryDirectory() as scratch:
    download([TF_REQUIREMENT], scratch)
    wheel = [os.path.join(scratch, n) for n in os.listdir(scratch) if n.endswith('.whl')][0]
    tree = os.path.join(scratch, 'tree')
    stripped_tensorflow_tree(wheel, tree)
    packed = os.path.join(scratch, 'tf.tar.xz')
    subprocess.run('tar cf - -C %s . | xz -9 -T0 > %s' % (tree, packed), shell=True, check=True)
    parts = split(packed, args.part_mib << 20, args.out)
  # The wheels and protos get a part of their own: beside the last TensorFlow part
  # they would pass a call's 64 MiB whenever that part is nearly full.
  last = os.path.join(args.out, 'part%d' % (parts + 1))
  download(WHEELS, os.path.join(last, 'deps'))
  protos = os.path.join(last, 'protos')
  os.makedirs(protos)
  for name in os.listdir(os.path.join(REPO_ROOT, 'protos')):
    if name.endswith('_pb2.py'):
      shutil.copy(os.path.join(REPO_ROOT, 'protos', name), protos)
  for part in sorted(os.listdir(args.out)):
    size = sum(os.path.getsize(os.path.join(r, n))
               for r, _, ns in os.walk(os.path.join(args.out, part)) for n in ns)
    print('%s %.1f MiB' % (part, size / 2 ** 20))


if __name__ == '__main__':
  main()
