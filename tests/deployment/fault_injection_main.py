"""Runs a slimtrain command line with one failure injected where it first touches storage.

    INJECT_AT=deployment.startup_checks:check_writable INJECT_FAULT=eio \
        python -m tests.deployment.fault_injection_main trainer.train --train_dir=...

replaces the function INJECT_AT names by one that raises the failure
INJECT_FAULT names (`FAULTS`) on its first call, then runs the program as
`python -m trainer.train --train_dir=...` would. Everything after the
injection point is the program's own: the exception travels up its real
call stack to its real main, whose exit code the tests check. Used for the
failures a test machine cannot produce on demand (a storage EIO, a GPU that
fails to initialise); those it can (no permission, a missing file, a bad
flag) the tests cause for real.
"""

import errno
import importlib
import os
import runpy
import sys

import tensorflow as tf


def _os_error(code):
  return OSError(code, os.strerror(code), '/mnt/train/model.ckpt-0.index')


FAULTS = {
    # Retryable (129).
    'eio': lambda: _os_error(errno.EIO),
    'etimedout': lambda: _os_error(errno.ETIMEDOUT),
    'econnreset': lambda: _os_error(errno.ECONNRESET),
    'unavailable': lambda: tf.errors.UnavailableError(
        None, None, 'failed to connect to all addresses; last error: UNKNOWN: '
        'ipv4:10.0.0.7:2222: Connection refused'),
    'deadline_exceeded': lambda: tf.errors.DeadlineExceededError(
        None, None, 'Timed out waiting for the storage service'),
    'aborted': lambda: tf.errors.AbortedError(
        None, None, 'The same RunGraph request was received twice'),
    'gfile_eio': lambda: tf.errors.UnknownError(
        None, None, '/mnt/train/checkpoint; Input/output error'),
    'cuda_init': lambda: tf.errors.InternalError(
        None, None, 'CUDA runtime implicit initialization on GPU:0 failed. Status: all '
        'CUDA-capable devices are busy or unavailable'),
    # Permanent (1).
    'not_found': lambda: tf.errors.NotFoundError(
        None, None, '/mnt/data/train.tfrecord-00000; No such file or directory'),
    'enoent': lambda: _os_error(errno.ENOENT),
    'value_error': lambda: ValueError('train_config.batch_size must be > 0, got 0'),
}


def _inject(target, fault):
  module_name, function_name = target.split(':')
  module = importlib.import_module(module_name)
  original = getattr(module, function_name)
  calls = []

  def failing(*args, **kwargs):
    calls.append(1)
    if len(calls) == 1:
      raise FAULTS[fault]()
    return original(*args, **kwargs)
  setattr(module, function_name, failing)


def main():
  _inject(os.environ['INJECT_AT'], os.environ['INJECT_FAULT'])
  program = sys.argv[1]
  sys.argv = [program] + sys.argv[2:]
  runpy.run_module(program, run_name='__main__', alter_sys=True)


if __name__ == '__main__':
  main()
