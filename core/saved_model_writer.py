"""Writes an export directory all at once: staged beside its target, then renamed.

A reader (TF Serving polling a base path, an evaluator picking the newest
export, a user copying a model) must never find half an export. Both export
paths of slimtrain -- `trainer.exporter.export_inference_graph` and
`Estimator.export_saved_model` (and through it every Exporter) -- write
through `write_atomically`:

    from core import saved_model_writer

    def write(staging_dir):
      builder = tf.compat.v1.saved_model.Builder(staging_dir)
      builder.add_meta_graph_and_variables(sess, ['serve'], signature_def_map=...)
      builder.save()

    saved_model_writer.write_atomically('/models/detector/7', write)

The staging directory is created with the mode the process umask allows
(usually 0755), not the 0700 of `tempfile.mkdtemp`, so the renamed export is
readable by the serving user like any other directory the job writes. If
`write_fn` raises, the staging directory is removed and the target is left
as it was.

Filesystems that cannot rename a directory in one step (gs://, s3://, the
in-memory ram://; `core.paths.renames_directories`) get the next best thing:
the staged files are copied into the target one by one, every
`saved_model.pb` last, and the staging directory is removed. A reader that
looks for `saved_model.pb` (TF Serving, `tf.saved_model.contains_saved_model`)
then only finds a complete export, but a listing during the copy shows a
version directory still filling up. If the copy fails, the partial target is
removed.
"""

from core import logs as logging
import tensorflow as tf

from core import paths

# Written last when an export is copied rather than renamed: the file whose
# presence tells readers a SavedModel is there.
_COMPLETE_EXPORT_MARKERS = ('saved_model.pb', 'saved_model.pbtxt')


def default_staging_dir(target):
  """A hidden, non-numeric sibling of `target` (TF Serving skips such names).

  Args:
    target: the final export directory (str or bytes).

  Returns:
    The staging path (str).
  """
  return paths.temp_sibling(target)


def _check_target_free(target):
  """Raises ValueError unless `target` is absent or an empty directory."""
  if not paths.exists(target):
    return
  if not paths.isdir(target):
    raise ValueError('export target %s exists and is not a directory' % target)
  if tf.io.gfile.listdir(target):
    raise ValueError('export target %s exists and is not empty' % target)


def write_atomically(target, write_fn, staging_dir=None):
  """Runs `write_fn(staging_dir)` and moves the staging directory to `target`.

  The move is a rename, or a copy on filesystems without atomic directory
  renames (see the module docstring).

  Args:
    target: the directory the export must end up in (str or bytes); absent,
      or an empty directory (which the export replaces).
    write_fn: fn(staging_dir) that writes the whole export into
      `staging_dir`, which exists and is empty when it is called.
    staging_dir: where to stage (default: `default_staging_dir(target)`); a
      leftover of a crashed earlier export there is removed first.

  Returns:
    `target`, as given.

  Raises:
    ValueError: if `target` exists and is not an empty directory.
    Whatever `write_fn` raises; nothing is left behind then.
  """
  target_str = tf.compat.as_str_any(target)
  _check_target_free(target_str)
  staging = tf.compat.as_str_any(staging_dir or default_staging_dir(target_str))
  if paths.exists(staging):
    logging.warning('Removing %s, left over by an export that did not finish.', staging)
    tf.io.gfile.rmtree(staging)
  # gfile.makedirs creates with 0777 minus the umask, as any other output.
  tf.io.gfile.makedirs(staging)
  try:
    write_fn(staging)
    # An empty target directory is replaced; one that filled up meanwhile is
    # an error, never overwritten.
    _check_target_free(target_str)
    _move_into_place(staging, target_str)
  except BaseException:
    if paths.exists(staging):
      tf.io.gfile.rmtree(staging)
    raise
  return target


def _move_into_place(staging, target):
  """Renames `staging` to `target`, or copies it where renames are not atomic."""
  target_was_there = paths.isdir(target)
  if paths.renames_directories(target):
    if target_was_there:
      tf.io.gfile.rmtree(target)
    tf.io.gfile.rename(staging, target)
    return
  try:
    paths.copy_tree(staging, target, last_names=_COMPLETE_EXPORT_MARKERS)
  except BaseException:
    # Never leave a target that looks like an export but is not complete.
    if paths.exists(target):
      tf.io.gfile.rmtree(target)
      if target_was_there:
        paths.makedirs(target)
    raise
  tf.io.gfile.rmtree(staging)
