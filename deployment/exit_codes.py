"""The exit-code contract every slimtrain command line follows.

A cluster scheduler decides from a task's exit code whether restarting it can
help. Kubeflow's TFJob with `restartPolicy: ExitCode` treats 1-127 as
permanent and 128-255 as retryable; slimtrain's codes are chosen to fit:

| code    | meaning                                                           |
| ------- | ----------------------------------------------------------------- |
| 0       | done: training (or evaluation, export) finished                   |
| 143     | preempted: SIGTERM arrived and the chief wrote a checkpoint       |
| 1-127   | permanent: bad config or flag, missing file, no permission to     |
|         | write train_dir, NaN loss, checkpoint of another model; a restart |
|         | runs into the same error                                          |
| 128-255 | retryable (143 aside): a peer unreachable past its timeout, a     |
|         | sync replica missing, recovery timed out, the chief lost; and     |
|         | (129) an uncaught failure known to pass: tf.errors Unavailable,   |
|         | DeadlineExceeded or Aborted, a storage OSError such as EIO,       |
|         | ETIMEDOUT or ECONNRESET, a GPU that failed to initialise          |

Every command line wraps its main with `main_with_exit_codes`, which maps an
uncaught exception to 1 or 129 with `classify` and logs one line naming the
class.

Usage:

    from deployment import exit_codes

    try:
      train(...)
    except cluster_errors.PeerLostError:
      sys.exit(exit_codes.RETRYABLE)

    if exit_codes.is_retryable(returncode):
      restart()

    app.run(exit_codes.main_with_exit_codes(main, 'trainer.train'))
"""

import collections
import errno
import os
import sys
import traceback

DONE = 0
# Bad input, NaN loss, a checkpoint that does not fit: retrying cannot help.
PERMANENT = 1
# 128 + SIGTERM: what a shell reports for a task ended by SIGTERM, so a task
# that saved and then exited looks to schedulers like the termination it was.
PREEMPTED = 143
# A peer (ps, chief, sync replica) was lost past its timeout; a restart of the
# task (or the job) resumes from the last checkpoint. Any code in 128-255
# other than 143 means "retryable"; this is the one slimtrain uses itself.
RETRYABLE = 129


def is_retryable(code):
  """Whether a restart can help a task that exited with `code`.

  Args:
    code: the process exit code (an int; negative values are how Python's
      subprocess reports death by signal N, which counts as 128 + N).

  Returns:
    True for 128-255 other than 143 (preempted tasks are restarted by the
    scheduler as a whole job, not as a failure).
  """
  code = normalize(code)
  return 128 <= code <= 255 and code != PREEMPTED


def is_permanent(code):
  """Whether `code` is a failure that a restart cannot fix (1-127)."""
  return 1 <= normalize(code) <= 127


def normalize(code):
  """Maps subprocess's `-N` (killed by signal N) to the shell's `128 + N`."""
  return 128 - code if code < 0 else code


# Failure classes -----------------------------------------------------------------------
#
# An exception that reaches a command line's main ends the process; whether a
# scheduler should start it again depends on what failed. `classify` decides,
# `main_with_exit_codes` applies it to a program's main.

# errno values of storage and network hiccups: the same call succeeds later.
TRANSIENT_ERRNOS = frozenset(
    _errno for _errno in (getattr(errno, name, None) for name in (
        'EIO', 'ETIMEDOUT', 'ECONNRESET', 'ECONNABORTED', 'ECONNREFUSED', 'EHOSTUNREACH',
        'EHOSTDOWN', 'ENETUNREACH', 'ENETDOWN', 'ENETRESET', 'ESTALE', 'EAGAIN', 'EREMOTEIO'))
    if _errno is not None)
# How TensorFlow's file systems word those errno values inside an OpError's message.
_TRANSIENT_STORAGE_WORDS = tuple(os.strerror(code) for code in sorted(TRANSIENT_ERRNOS))
# Messages of a GPU that failed to initialise (a driver or device hiccup of the node;
# another start, often on another node, gets a working GPU).
_CUDA_INIT_WORDS = ('CUDA runtime implicit initialization', 'failed call to cuInit',
                    'failed initializing StreamExecutor', 'cuDevicePrimaryCtxRetain',
                    'CUDA_ERROR_NOT_INITIALIZED', 'CUDA_ERROR_DEVICE_UNAVAILABLE',
                    'CUDA_ERROR_SYSTEM_NOT_READY', 'cudaErrorDevicesUnavailable',
                    'cudaSetDevice() on GPU')
# tf.errors classes that mean "try again": a peer or service that did not answer in
# time, or a request the runtime gave up on part way.
_TRANSIENT_OP_ERRORS = {
    'UnavailableError': 'unavailable (a peer or a storage service did not answer)',
    'DeadlineExceededError': 'deadline exceeded (a peer or a storage service was too slow)',
    'AbortedError': 'aborted (TensorFlow gave up on a request part way; it can be sent again)',
}

Classification = collections.namedtuple('Classification', ['code', 'failure_class', 'reason'])


def classify(exc):
  """The exit code for an exception that ended a program, with the class it falls in.

  Retryable (129) are the failures known to pass: the tf.errors of
  `_TRANSIENT_OP_ERRORS`, an OSError (or a TensorFlow file system error)
  with an errno of `TRANSIENT_ERRNOS` (EIO, ETIMEDOUT, ECONNRESET, ...), and a
  GPU that failed to initialise. Everything else is permanent (1): a bad
  config or flag, a missing file, no permission, a NaN loss, a bug. The
  exception's explicit causes (`raise ... from e`) are looked at too, so a
  ValueError raised from a storage hiccup is still retryable.

  Args:
    exc: the exception.

  Returns:
    A `Classification(code, failure_class, reason)`: the exit code, a short
    name of the class ('unavailable', 'transient storage error', ...,
    'permanent') and a one-line reason naming the exception.
  """
  seen = exc
  while seen is not None:
    found = _transient_class(seen)
    if found:
      return Classification(RETRYABLE, found, '%s: %s' % (found, _one_line(seen)))
    seen = seen.__cause__
  return Classification(PERMANENT, 'permanent', _one_line(exc))


def _transient_class(exc):
  """The name of the transient class `exc` belongs to, or None."""
  message = str(exc)
  if any(words in message for words in _CUDA_INIT_WORDS):
    return 'GPU initialisation failure'
  if isinstance(exc, OSError) and exc.errno in TRANSIENT_ERRNOS:
    return 'transient storage error (%s)' % errno.errorcode.get(exc.errno, exc.errno)
  op_error_names = [cls.__name__ for cls in type(exc).__mro__
                    if cls.__module__.startswith('tensorflow.')]
  if not op_error_names:
    return None
  for name in op_error_names:
    if name in _TRANSIENT_OP_ERRORS:
      return _TRANSIENT_OP_ERRORS[name]
  if any(words in message for words in _TRANSIENT_STORAGE_WORDS):
    return 'transient storage error (%s)' % type(exc).__name__
  return None


def _one_line(exc, max_chars=400):
  text = ' '.join(str(exc).split())
  if len(text) > max_chars:
    text = text[:max_chars - 3] + '...'
  return '%s: %s' % (type(exc).__name__, text) if text else type(exc).__name__


def main_with_exit_codes(main, program):
  """Wraps a command line's `main(argv)` so that an uncaught exception exits by its class.

  A retryable failure (see `classify`) logs its traceback and then one line,
  `<program>: retryable failure (<class>): <exception>; exiting 129`, and
  exits 129; a permanent one logs the traceback and
  `<program>: permanent failure: <exception>; exiting 1`, and exits 1.
  `SystemExit` (the program's own exit codes, 143 and 129 included) and
  absl's `UsageError` (a bad flag: absl prints the usage and exits 1) pass
  through unchanged.

  Args:
    main: the program's `main(argv)`, as given to `absl.app.run`.
    program: its name for the log line, e.g. 'trainer.train'.

  Returns:
    The wrapped main, for `app.run`.
  """
  def wrapped(argv):
    from absl import app  # pylint: disable=import-outside-toplevel
    try:
      return main(argv)
    except (SystemExit, KeyboardInterrupt, app.UsageError):
      raise
    except Exception as exc:  # pylint: disable=broad-except
      _exit_for(exc, program)
  return wrapped


def _exit_for(exc, program):
  """Logs `exc` with its class and ends the process with the class's code."""
  # Imported here: this module is read by programs that never load TensorFlow.
  from core import logs as logging  # pylint: disable=import-outside-toplevel
  from deployment import fault_tolerance  # pylint: disable=import-outside-toplevel
  found = classify(exc)
  logging.error('%s', ''.join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
  if found.code == RETRYABLE:
    line = '%s: retryable failure (%s); exiting %d' % (program, found.reason, found.code)
  else:
    line = '%s: permanent failure: %s; exiting %d' % (program, found.reason, found.code)
  logging.error('%s', line)
  sys.stderr.write(line + '\n')
  fault_tolerance.exit_process(found.code)
