"""Compiles every protos/*.proto into protos/*_pb2.py with grpcio-tools.

Run as `python protos/compile_protos.py` from anywhere; setup.py calls
`compile_all()` before building. Only stale outputs are regenerated.
"""

import glob
import os
import sys

_PROTOS_DIR = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_PROTOS_DIR)


def _is_stale(proto_path):
  output = proto_path[:-len('.proto')] + '_pb2.py'
  if not os.path.exists(output):
    return True
  return os.path.getmtime(output) < os.path.getmtime(proto_path)


def compile_all(force=False):
  """Generates `<name>_pb2.py` for each `.proto` in this folder.

  Args:
    force: regenerate even when the outputs are newer than their sources.

  Returns:
    The list of `.proto` paths that were compiled.

  Raises:
    RuntimeError: if grpcio-tools is missing or protoc reports an error.
  """
  try:
    from grpc_tools import protoc  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise RuntimeError(
        'grpcio-tools is needed to compile protos/*.proto '
        '(pip install grpcio-tools)') from e
  import importlib.resources  # pylint: disable=import-outside-toplevel
  well_known = str(importlib.resources.files('grpc_tools') / '_proto')
  sources = sorted(glob.glob(os.path.join(_PROTOS_DIR, '*.proto')))
  if not force and not any(_is_stale(p) for p in sources):
    return []
  # All files at once so that cross-file imports resolve consistently.
  relative = [os.path.relpath(p, _ROOT) for p in sources]
  args = ['protoc', '-I' + _ROOT, '-I' + well_known,
          '--python_out=' + _ROOT] + relative
  if protoc.main(args) != 0:
    raise RuntimeError('protoc failed on %s' % ' '.join(relative))
  return sources


if __name__ == '__main__':
  compiled = compile_all(force='--force' in sys.argv)
  print('compiled %d proto file(s)' % len(compiled))
