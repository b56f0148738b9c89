"""The route that brings TensorFlow to the lent GPU machine, on a tiny payload.

tools/gpu_payload.py splits a packed tree into parts that fit a device call;
tools/gpu_machine_setup.sh receives them one call at a time, then installs:
unpacks the tree, installs the wheels, copies the protos and links CUDA 13
libraries under the CUDA 12 names TensorFlow opens. Here the tree is one small
package, the wheel is made by hand and the "CUDA libraries" are empty files in a
temporary folder, so every step runs as on that machine, without it.
"""

import io
import lzma
import os
import subprocess
import sys
import tarfile
import zipfile

from tools import gpu_payload

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETUP = os.path.join(REPO_ROOT, 'tools', 'gpu_machine_setup.sh')


def _packed_tree(path):
  """A tar.xz holding package `fake_tf` (10 kB of incompressible bytes beside it)."""
  buffer = io.BytesIO()
  with tarfile.open(fileobj=buffer, mode='w') as tar:
    for name, data in (('fake_tf/__init__.py', b'VERSION = "2.21.0"\n'),
                       ('fake_tf/blob.bin', os.urandom(10000))):
      info = tarfile.TarInfo(name)
      info.size = len(data)
      tar.addfile(info, io.BytesIO(data))
  with open(path, 'wb') as packed:
    packed.write(lzma.compress(buffer.getvalue()))


def _wheel(folder):
  """A minimal pure-Python wheel of package `tiny_dep` 1.0."""
  path = os.path.join(folder, 'tiny_dep-1.0-py3-none-any.whl')
  files = {
      'tiny_dep/__init__.py': 'ANSWER = 42\n',
      'tiny_dep-1.0.dist-info/METADATA': 'Metadata-Version: 2.1\nName: tiny_dep\nVersion: 1.0\n',
      'tiny_dep-1.0.dist-info/WHEEL': ('Wheel-Version: 1.0\nGenerator: hand\n'
                                       'Root-Is-Purelib: true\nTag: py3-none-any\n'),
  }
  record = ''.join('%s,,\n' % name for name in files) + 'tiny_dep-1.0.dist-info/RECORD,,\n'
  with zipfile.ZipFile(path, 'w') as archive:
    for name, text in files.items():
      archive.writestr(name, text)
    archive.writestr('tiny_dep-1.0.dist-info/RECORD', record)


def test_split_parts_fit_and_concatenate_to_the_original(tmp_path):
  packed = tmp_path / 'tf.tar.xz'
  packed.write_bytes(os.urandom(2500))
  count = gpu_payload.split(str(packed), 1000, str(tmp_path / 'out'))
  assert count == 3
  parts = [tmp_path / 'out' / ('part%d' % k) / ('tf.tar.xz.part%03d' % k) for k in (1, 2, 3)]
  assert [p.stat().st_size for p in parts] == [1000, 1000, 500]
  assert b''.join(p.read_bytes() for p in parts) == packed.read_bytes()


def test_receive_then_install_gives_importable_packages_and_cuda_12_names(tmp_path):
  out = tmp_path / 'parts'
  _packed_tree(str(tmp_path / 'tf.tar.xz'))
  count = gpu_payload.split(str(tmp_path / 'tf.tar.xz'), 4096, str(out))
  assert count >= 2  # The tree does not fit one part: receive must join several.
  last = out / ('part%d' % count)
  (last / 'deps').mkdir()
  _wheel(str(last / 'deps'))
  (last / 'protos').mkdir()
  (last / 'protos' / 'pipeline_pb2.py').write_text('# compiled here\n')
  cuda = tmp_path / 'cuda13'
  (cuda / 'lib').mkdir(parents=True)
  for name in ('libcublas.so.13', 'libcudnn.so.9'):
    (cuda / 'lib' / name).write_bytes(b'')
  env = dict(os.environ, PAYLOAD=str(tmp_path / 'payload'), SITE=str(tmp_path / 'site'),
             PROTOS_DIR=str(tmp_path / 'protos'), CUDA_ROOTS=str(cuda), PYTHON=sys.executable)
  (tmp_path / 'protos').mkdir()
  for k in range(1, count + 1):
    subprocess.run(['bash', SETUP, 'receive', str(out / ('part%d' % k))], env=env, check=True,
                   capture_output=True)

  script = ('eval "$(bash %s install)" && "$PYTHON" -c "import fake_tf, tiny_dep; '
            'print(fake_tf.VERSION, tiny_dep.ANSWER)" && echo "LD=$LD_LIBRARY_PATH"' % SETUP)
  result = subprocess.run(['bash', '-c', script], env=env, capture_output=True, text=True,
                          cwd=str(tmp_path))
  assert result.returncode == 0, result.stderr
  assert '2.21.0 42' in result.stdout
  site = tmp_path / 'site'
  assert (site / 'fake_tf' / 'blob.bin').stat().st_size == 10000
  assert (tmp_path / 'protos' / 'pipeline_pb2.py').read_text() == '# compiled here\n'
  # A CUDA 13 library stands in under the CUDA 12 name; an exact name is taken as is.
  cublas = site / 'nvidia' / 'cublas' / 'lib' / 'libcublas.so.12'
  assert os.readlink(cublas) == str(cuda / 'lib' / 'libcublas.so.13')
  assert os.readlink(site / 'nvidia' / 'cudnn' / 'lib' / 'libcudnn.so.9') == str(
      cuda / 'lib' / 'libcudnn.so.9')
  assert 'libcufft.so.11: not found on this machine' in result.stderr
  # Every link folder is on the library path (TF opens cuSOLVER from a library
  # whose RUNPATH lacks nvidia/cusolver/lib).
  library_path = result.stdout.split('LD=')[1].split(':')
  assert str(site / 'nvidia' / 'cusolver' / 'lib') in library_path
  assert str(site / 'nvidia' / 'cublas' / 'lib') in library_path


def test_install_without_parts_says_what_to_do(tmp_path):
  env = dict(os.environ, PAYLOAD=str(tmp_path / 'nothing'), SITE=str(tmp_path / 'site'),
             PYTHON=sys.executable)
  result = subprocess.run(['bash', SETUP, 'install'], env=env, capture_output=True, text=True)
  assert result.returncode == 1
  assert 'receive the parts first' in result.stderr


if __name__ == '__main__':
  import pytest
  sys.exit(pytest.main([__file__, '-q']))
