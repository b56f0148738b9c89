"""Finding checkpoints, reading their step, and following a training directory.

Every part of slimtrain that reads a checkpoint someone else wrote (fine-tuning,
warm-starting, the evaluators, the exporter, the demo) asks this module, so a
path means the same thing everywhere:

    from core import checkpoints
    prefix = checkpoints.resolve_checkpoint_path('/tmp/train')   # its latest
    step = checkpoints.checkpoint_step(prefix)                  # e.g. 1000
    step = checkpoints.latest_step('/tmp/train')                # the same; 0 without one

    # Evaluate each checkpoint as training writes it, until step 1000 or
    # 10 minutes without a new one.
    outcome = checkpoints.follow_checkpoints(
        '/tmp/train', evaluate_fn, min_interval_secs=60, timeout=600,
        stop_fn=lambda path, metrics, count: 'final' if metrics['step'] >= 1000 else None)
    outcome.stop_reason  # 'final', or checkpoints.STOP_TIMEOUT

A checkpoint path is a prefix (`.../model.ckpt-1000`), a directory with a
`checkpoint` state file (its latest checkpoint), a SavedModel directory or its
`variables/variables` prefix.

An evaluator started together with its training job (on Kubernetes every pod
of a job starts at once) is given a training directory the chief has not
created yet. `checkpoint_source` tells such a directory-to-come (which the
evaluator waits for) from a path that is plainly wrong (which fails at once).
"""

import collections
import re

from core import logs as logging
import tensorflow as tf

from core import paths

# FollowOutcome.stop_reason when no new checkpoint came within the timeout.
STOP_TIMEOUT = 'timeout'

# What `checkpoint_source` finds at a path.
SOURCE_PREFIX = 'prefix'
SOURCE_DIRECTORY = 'directory'
SOURCE_PENDING = 'pending'
# Names a trainer gives checkpoint prefixes (model.ckpt, model.ckpt-1000), never directories.
_PREFIX_NAME = re.compile(r'\.ckpt(-\d+)?$')

FollowOutcome = collections.namedtuple(
    'FollowOutcome', ['result', 'checkpoint_path', 'count', 'stop_reason'])


def resolve_checkpoint_path(path):
  """Turns a checkpoint prefix, directory or SavedModel path into a prefix.

  Accepted, in this order:
    * a directory with a `checkpoint` state file: its latest checkpoint;
    * a SavedModel directory (with `variables/variables.index`);
    * a checkpoint prefix (V2 with `<prefix>.index`, or a V1 file), e.g.
      `model.ckpt-1000` or `<saved_model>/variables/variables`.

  Args:
    path: the path as configured (e.g. `fine_tune_checkpoint`).

  Returns:
    A checkpoint prefix that `tf.compat.v1.train.Saver.restore` accepts.

  Raises:
    ValueError: if `path` is empty or nothing readable is found there; the
      message names `path`.
  """
  if not path:
    raise ValueError('Checkpoint path is empty.')
  if paths.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest:
      return latest
    saved_model_variables = paths.join(path, 'variables', 'variables')
    if paths.exists(saved_model_variables + '.index'):
      return saved_model_variables
    raise ValueError(
        'No checkpoint found in directory %s: it has no "checkpoint" state '
        'file pointing at a checkpoint and no SavedModel variables/variables.'
        % path)
  if paths.exists(path + '.index') or (paths.exists(path) and
                                       not paths.isdir(path)):
    return path
  raise ValueError(
      'No checkpoint found at %s: expected a checkpoint prefix (with a .index '
      'file), a directory with a "checkpoint" state file, or a SavedModel '
      '(directory or its variables/variables prefix).' % path)


def checkpoint_step(checkpoint_path):
  """The global step stored in a checkpoint.

  Args:
    checkpoint_path: a checkpoint prefix.

  Returns:
    The value of its `global_step` tensor; without one, the number after the
    last `-` of the prefix (`model.ckpt-1000` -> 1000); else 0.
  """
  reader = tf.compat.v1.train.NewCheckpointReader(checkpoint_path)
  if reader.has_tensor(tf.compat.v1.GraphKeys.GLOBAL_STEP):
    return int(reader.get_tensor(tf.compat.v1.GraphKeys.GLOBAL_STEP))
  match = re.search(r'-(\d+)$', checkpoint_path)
  return int(match.group(1)) if match else 0


def latest_step(checkpoint_dir):
  """The global step of the latest checkpoint in `checkpoint_dir`, or 0 when there is none.

  For loops that poll a directory other tasks write (the Estimator's
  `load_global_step_from_checkpoint_dir`, stop-at-step hooks): no directory
  yet, no checkpoint yet, or a checkpoint deleted between listing and
  reading (a trainer's keep-the-last-N cleanup) all read as step 0, never
  as an error.

  Args:
    checkpoint_dir: a training directory (a checkpoint prefix works too).

  Returns:
    An int, as `checkpoint_step` reads it.
  """
  try:
    return checkpoint_step(resolve_checkpoint_path(checkpoint_dir))
  except (ValueError, tf.errors.OpError):
    return 0


def finished_step(train_dir, num_steps):
  """The step of `train_dir`'s latest checkpoint if training there reached `num_steps`.

  What a task (re)started after its job finished checks first, instead of
  waiting for peers that have exited.

  Args:
    train_dir: the training directory.
    num_steps: train_config.num_steps; 0 or None (train forever) is never reached.

  Returns:
    The latest checkpoint's global step when it is >= `num_steps`, else None.
  """
  if not num_steps or not train_dir or not paths.isdir(train_dir):
    return None
  latest = tf.train.latest_checkpoint(train_dir)
  if latest is None:
    return None
  step = checkpoint_step(latest)
  return step if step >= num_steps else None


def checkpoint_source(path, may_wait=True):
  """What an evaluator's checkpoint path names, or why it can never name anything.

  Args:
    path: a checkpoint prefix or a training directory (`--checkpoint_dir`).
    may_wait: whether the caller could wait for checkpoints to appear (a
      continuous evaluator); False for a one-off evaluation (`--run_once`),
      for which a missing path is an error.

  Returns:
    SOURCE_PREFIX (`path.index` exists), SOURCE_DIRECTORY (an existing
    directory) or SOURCE_PENDING: nothing is there yet, and the path can be
    a training directory that training has still to create.

  Raises:
    ValueError: naming `path`, when nothing is there and waiting cannot
      help: `may_wait` is False, the name is a checkpoint prefix's
      (`model.ckpt`, `model.ckpt-1000`), or the parent directory is a
      training directory (holds a `checkpoint` state file), so `path` names
      something in it that is not there.
  """
  if not path:
    raise ValueError('Checkpoint path is empty.')
  if paths.exists(path + '.index'):
    return SOURCE_PREFIX
  if paths.isdir(path):
    return SOURCE_DIRECTORY
  if not may_wait:
    raise ValueError('%s: no such directory or checkpoint prefix (nothing to evaluate '
                     'once; without run_once an evaluator waits for the directory)' % path)
  if _PREFIX_NAME.search(paths.basename(path)):
    raise ValueError('%s: no such checkpoint prefix (there is no %s.index)' % (path, path))
  parent = paths.parent(path) or '.'
  if paths.exists(paths.join(parent, 'checkpoint')):
    raise ValueError('%s: no such directory or checkpoint prefix in the training directory '
                     '%s' % (path, parent))
  return SOURCE_PENDING


def _was_deleted(checkpoint_path):
  return not paths.exists(checkpoint_path + '.index')


def follow_checkpoints(checkpoint_dir, evaluate_fn, min_interval_secs=0, timeout=None,
                       stop_fn=None):
  """Calls `evaluate_fn` on each new checkpoint of a directory, oldest first.

  The loop behind every continuous evaluation: it waits (at most `timeout`
  seconds each time) for the `checkpoint` state file to name a checkpoint it
  has not seen, evaluates it, and asks `stop_fn` whether that was enough. A
  checkpoint the trainer deleted before its turn (keep_checkpoint_max) is
  skipped with a log line; any other error propagates.

  Args:
    checkpoint_dir: the training directory.
    evaluate_fn: fn(checkpoint_path) -> result (e.g. a metrics dict).
    min_interval_secs: at least this many seconds between two evaluations.
    timeout: stop after this many seconds without a new checkpoint; None or 0
      waits as long as it takes (only `stop_fn` ends the loop then).
    stop_fn: optional fn(checkpoint_path, result, count) -> a reason (any true
      value, returned as `stop_reason`) to stop after this checkpoint, or None;
      `count` is the number of checkpoints evaluated so far, this one included.

  Returns:
    A `FollowOutcome(result, checkpoint_path, count, stop_reason)` with the
    last evaluation's result and checkpoint (None when there was none), the
    number of checkpoints evaluated and why the loop ended (`STOP_TIMEOUT`
    or what `stop_fn` returned).
  """
  result, last_path, count = None, None, 0
  for path in tf.compat.v1.train.checkpoints_iterator(
      checkpoint_dir, min_interval_secs=min_interval_secs, timeout=timeout or None):
    try:
      result = evaluate_fn(path)
    except (tf.errors.NotFoundError, ValueError):
      if not _was_deleted(path):
        raise
      logging.warning('Checkpoint %s was deleted before it could be evaluated (the trainer '
                      'keeps only the newest ones); skipping it.', path)
      continue
    last_path, count = path, count + 1
    reason = stop_fn(path, result, count) if stop_fn else None
    if reason:
      return FollowOutcome(result, last_path, count, reason)
  logging.warning('No new checkpoint in %s for %s seconds; stopping after %d evaluations.',
                  checkpoint_dir, timeout, count)
  return FollowOutcome(result, last_path, count, STOP_TIMEOUT)
