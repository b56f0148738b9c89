r"""Paths that mean the same on every TensorFlow filesystem.

A user may point any directory or file of slimtrain (pipeline configs,
`train_dir`, `eval_dir`, `model_dir`, exports, label maps, checkpoints, the
dataset writers' output, the demo's `output_dir`) at a local folder or at a
filesystem TensorFlow knows by a scheme: `gs://bucket/run`, `s3://...`,
`hdfs://...`, or the in-memory `ram://` the tests use. Python's `os.path`
does not know schemes: `os.path.abspath('gs://bucket/run')` is
`<cwd>/gs:/bucket/run`, and `os.makedirs` on it quietly creates a local
folder. So every user path goes through this module and `tf.io.gfile`:

    from core import paths

    train_dir = paths.absolute(flags_train_dir)      # 'gs://b/run' stays as is
    paths.makedirs(train_dir)
    config_path = paths.join(train_dir, 'pipeline.config')
    paths.write_file_atomically(config_path, text)   # temp sibling, then rename
    text = paths.read_text(config_path)

Atomic writes. A file is written to a hidden sibling and renamed over its
target, so a reader sees the old content or the new, never half a file. On
local disks and HDFS that rename is atomic. On object stores (gs://, s3://)
a rename is a server-side copy and a delete; the copied object still appears
whole, so single files stay safe there too. Directories are different: on
object stores (and `ram://`, whose rename moves only the directory entry, not
its files) a directory cannot be renamed as one. `renames_directories(path)`
tells which case applies, and `core/saved_model_writer.py` copies a staged
export file by file instead, its `saved_model.pb` last (see there).

Files and directories get the permissions the process umask allows, as
tf.io.gfile creates them.

Differs on purpose from plain `os.path`:
  * `absolute` leaves scheme paths alone (only local paths are made absolute);
  * `join` and `parent` use '/' for scheme paths, whatever the local OS, and
    never take a path above its scheme root (`gs://bucket`).
"""

import os
import posixpath
import re
import uuid

import tensorflow as tf

# `scheme://` at the start of a path, as TensorFlow's filesystem registry
# parses it (RFC 3986 scheme characters).
_SCHEME = re.compile(r'^([A-Za-z][A-Za-z0-9+.-]*)://')

# Filesystems whose directory rename is one atomic operation.
_ATOMIC_DIRECTORY_RENAME_SCHEMES = ('', 'file', 'hdfs', 'viewfs')


def scheme(path):
  """The filesystem scheme of `path` ('gs' for 'gs://b/x'); '' for a local path.

  Args:
    path: str, bytes or os.PathLike.

  Returns:
    The lower-case scheme, or ''.
  """
  match = _SCHEME.match(_as_str(path))
  return match.group(1).lower() if match else ''


def is_local(path):
  """True for a path on the local disk (no scheme, or `file://`)."""
  return scheme(path) in ('', 'file')


def _as_str(path):
  return tf.compat.as_str_any(os.fspath(path))


def absolute(path):
  """`path` made absolute if it is local; a scheme path is returned unchanged.

  Args:
    path: str, bytes or os.PathLike.

  Returns:
    str.
  """
  path = _as_str(path)
  return path if scheme(path) else os.path.abspath(path)


def join(path, *parts):
  """Joins path parts; '/' for scheme paths, `os.path.join` for local ones."""
  path = _as_str(path)
  parts = [_as_str(part) for part in parts]
  return posixpath.join(path, *parts) if scheme(path) else os.path.join(path, *parts)


def parent(path):
  """The directory holding `path`; a scheme root (`gs://bucket`) is its own parent.

  Args:
    path: str, bytes or os.PathLike; a trailing '/' is ignored.

  Returns:
    str.
  """
  path = _as_str(path)
  match = _SCHEME.match(path)
  if not match:
    return os.path.dirname(path.rstrip(os.sep) or os.sep)
  root_end = path.find('/', match.end())
  if root_end < 0:
    return path
  rest = posixpath.dirname(path[root_end:].rstrip('/') or '/')
  return path[:root_end] + ('' if rest == '/' else rest)


def basename(path):
  """The last component of `path` (a trailing '/' is ignored)."""
  return posixpath.basename(_as_str(path).rstrip('/'))


def exists(path):
  """Whether a file or directory `path` exists, on any TF filesystem.

  Like `tf.io.gfile.exists`, except on `ram://`: TensorFlow's in-memory
  filesystem reports every string prefix of an existing name as an existing
  directory (`ram://d/model.ckpt-5` "exists" when `ram://d/model.ckpt-5.index`
  does), so there the answer is checked against the parent's listing. Such
  directories must have been created (`makedirs`), as every writer here does.
  """
  path = _as_str(path).rstrip('/') or '/'
  if not tf.io.gfile.exists(path):
    return False
  return scheme(path) != 'ram' or _listed_in_parent(path)


def isdir(path):
  """Whether `path` is a directory, on any TF filesystem (see `exists` for ram://)."""
  path = _as_str(path).rstrip('/') or '/'
  if not tf.io.gfile.isdir(path):
    return False
  return scheme(path) != 'ram' or _listed_in_parent(path)


def _listed_in_parent(path):
  """Whether `path` is a name its parent directory lists (a scheme root always is)."""
  directory = parent(path)
  if directory == path:
    return True
  try:
    return basename(path) in tf.io.gfile.listdir(directory)
  except tf.errors.NotFoundError:
    return False


def makedirs(path):
  """Creates directory `path` and its parents on any TF filesystem (no error if present)."""
  tf.io.gfile.makedirs(_as_str(path))


def read_text(path):
  """The content of a UTF-8 text file on any TF filesystem.

  Raises:
    tf.errors.NotFoundError: if `path` does not exist.
  """
  with tf.io.gfile.GFile(_as_str(path), 'rb') as f:
    return f.read().decode('utf-8')


def temp_sibling(path):
  """A hidden, unique name beside `path` to stage its content in.

  The name starts with '.' and is not a number, so TF Serving and the
  checkpoint and export listings of slimtrain skip it.
  """
  path = _as_str(path).rstrip('/')
  return join(parent(path), '.%s.tmp-%s' % (basename(path), uuid.uuid4().hex[:12]))


def write_file_atomically(path, contents):
  """Writes `contents` (str or bytes) to `path` through a temp sibling and a rename.

  A reader finds the old file or the new one, never a partial one (see the
  module docstring for object stores). The parent directory must exist.

  Args:
    path: the file to (over)write.
    contents: str (written as UTF-8) or bytes.

  Returns:
    `path` as str.
  """
  path = _as_str(path)
  temp_path = temp_sibling(path)
  data = contents.encode('utf-8') if isinstance(contents, str) else bytes(contents)
  try:
    with tf.io.gfile.GFile(temp_path, 'wb') as f:
      f.write(data)
    tf.io.gfile.rename(temp_path, path, overwrite=True)
  except BaseException:
    if tf.io.gfile.exists(temp_path):
      tf.io.gfile.remove(temp_path)
    raise
  return path


def renames_directories(path):
  """Whether a directory on `path`'s filesystem can be renamed in one atomic step.

  True for local disks and HDFS; False for object stores (gs://, s3://),
  where a rename copies object by object, and for `ram://`, whose rename
  leaves a directory's files behind.
  """
  return scheme(path) in _ATOMIC_DIRECTORY_RENAME_SCHEMES


def copy_tree(source, target, last_names=()):
  """Copies every file under directory `source` to the same place under `target`.

  Args:
    source: an existing directory.
    target: where the files go; created as needed. Files already there are
      overwritten.
    last_names: file names (e.g. 'saved_model.pb') copied after all other
      files, so a reader that waits for them finds everything else present.

  Returns:
    The number of files copied.
  """
  source, target = _as_str(source).rstrip('/'), _as_str(target).rstrip('/')
  first, last = [], []
  for directory, _, files in tf.io.gfile.walk(source):
    relative = directory[len(source):].lstrip('/')
    makedirs(join(target, relative) if relative else target)
    for name in files:
      pair = (join(directory, name), join(target, relative, name) if relative
              else join(target, name))
      (last if name in last_names else first).append(pair)
  for from_path, to_path in first + last:
    tf.io.gfile.copy(from_path, to_path, overwrite=True)
  return len(first) + len(last)
