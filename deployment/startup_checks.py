"""What a training task checks before it builds anything: can it write its output directory.

On Kubernetes the pod's user often cannot write the volume it was given: a
ReadWriteMany claim whose CSI driver ignores `fsGroup`, a `gs://` bucket
without a service account that may write to it. Without a check the chief
builds its graph, then fails at its first write (the pipeline config, a
checkpoint) with a PermissionDenied deep in a traceback. The chief checks
first, by creating and deleting a small file, and stops with one message
that names the directory, the uid and the fix:

    from deployment import startup_checks

    try:
      startup_checks.check_writable(FLAGS.train_dir, '--train_dir')
    except startup_checks.NotWritableError as e:
      logging.error('%s', e)
      return exit_codes.PERMANENT

Only "not allowed" counts as not writable (a permanent error); any other
failure of the probe (an I/O error of the storage, a timeout) propagates, and
`deployment.exit_codes.classify` decides whether it is retryable.
"""

import errno
import os
import socket

import tensorflow as tf

from core import paths

# errno values of "you may not write here" on a local or mounted file system.
_DENIED_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS)
_DENIED_WORDS = ('Permission denied', 'Read-only file system', 'Operation not permitted')


class NotWritableError(Exception):
  """This task may not write its output directory; the message says how to fix it."""


def check_writable(directory, flag):
  """Creates `directory` if needed, then creates and deletes a file in it.

  Args:
    directory: a local path or any path tf.io.gfile opens (gs://...).
    flag: the flag that named it, for the message (e.g. '--train_dir').

  Raises:
    NotWritableError: when creating the directory or the file was refused;
      the message names the path, the uid and what to change.
  """
  probe = paths.join(directory, '.write_check-%s-%d' % (socket.gethostname(), os.getpid()))
  try:
    tf.io.gfile.makedirs(directory)
    with tf.io.gfile.GFile(probe, 'w') as f:
      f.write('slimtrain start-up check: this task can write here\n')
    tf.io.gfile.remove(probe)
  except (tf.errors.PermissionDeniedError, OSError, tf.errors.OpError) as e:
    if not _is_denied(e):
      raise
    raise NotWritableError(_message(directory, flag, e)) from e


def _is_denied(error):
  if isinstance(error, tf.errors.PermissionDeniedError):
    return True
  if isinstance(error, OSError) and error.errno in _DENIED_ERRNOS:
    return True
  # TensorFlow's local file system reports a read-only mount as FailedPrecondition.
  return any(words in str(error) for words in _DENIED_WORDS)


def _message(directory, flag, error):
  """One message: what was refused, to whom, and the fix for this kind of storage."""
  uid = os.getuid()
  head = ('%s=%s is not writable by this process (uid %d, gid %d): %s. ' %
          (flag, directory, uid, os.getgid(), ' '.join(str(error).split())))
  if '://' in directory:
    scheme = directory.split('://', 1)[0]
    return head + (
        'Fix: run the pod with a Kubernetes service account whose cloud identity may '
        'write there (deployment.tfjob --service_account=NAME, bound e.g. through GKE '
        'Workload Identity to a Google service account with roles/storage.objectAdmin '
        'on the bucket), or point %s at a %s:// path that identity may write.' %
        (flag, scheme))
  return head + (
      'Fix: make the volume writable for uid %d: with deployment.tfjob, '
      '--run_as_user=%d --fs_group=GID (many ReadWriteMany CSI drivers ignore fsGroup); '
      'otherwise chown the directory on the volume, e.g. `chown -R %d %s` from an init '
      'container or by hand, or choose a %s on a volume this uid may write.' %
      (uid, uid, uid, directory, flag))
