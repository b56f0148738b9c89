"""After a lost ps, restore only that ps's variables; the other ps tasks keep theirs.

A ps task that dies and comes back on its address holds no variables. When
the chief rebuilds its session, TensorFlow's `SessionManager` restores the
latest checkpoint into *every* variable: the shards of the ps tasks that never
failed roll back to the checkpoint too, and the whole cluster loses the work
done since it was written (up to `save_interval_secs`, 600 s by default).

`ShardRestore` groups a saver's variables by the ps task that holds them
and, at restore time, asks each ps which of its variables are uninitialised:

* every shard uninitialised (a fresh job, or every ps lost): the usual full
  restore;
* some shards uninitialised (a ps came back empty): only those are restored
  from the checkpoint; the others keep their current values, so the global
  step rolls back only when its own ps was the one lost;
* none (a chief restarted while every ps kept its variables): nothing is
  restored; training goes on from the values the ps tasks hold.

With `snapshot_interval_secs`, a lost shard comes from a snapshot a few
seconds old held by another ps (`deployment.shard_snapshots`) when that ps
kept it, and from the checkpoint otherwise (its holder was lost too, no
snapshot was taken yet, or the checkpoint is of a later global step); one
line per shard names the source and its age.

In asynchronous training a restored shard a little older than the others is
ordinary staleness. Synchronous training (`SyncReplicasOptimizer`) restores
the whole model instead, so that every replica's gradients again come from
one consistent point (`partial=False`).

Usage (legacy trainer; the Estimator's chief passes `ShardRestore.saver_for`
of its Scaffold's saver to its SessionManager):

    saver = shard_restore.ShardRestoringSaver(
        var_list=model_deploy.savable_variables(), partial=not sync_replicas,
        snapshot_interval_secs=5)
    slim.learning.train(train_op, logdir, saver=saver, ...)
    # On the chief, with each session's first step (trainer.training_loop):
    if saver.snapshots is not None:
      saver.snapshots.start(sess)   # stop() at the end and before a new session

Differs on purpose from `tf.compat.v1.train.Saver` / `SessionManager`: a
restore into a session whose ps tasks hold live variables leaves those
variables alone instead of rolling them back to the checkpoint.
"""

import collections
import re

from core import logs as logging
import tensorflow as tf

from deployment import shard_snapshots


def _task_of(variable):
  """'/job:ps/task:N' (or the variable's job and task) of a variable's device."""
  spec = tf.DeviceSpec.from_string(variable.device or '')
  if spec.job is None:
    return None
  return '/job:%s/task:%d' % (spec.job, spec.task or 0)


def _shards_of(var_list):
  """Splits a Saver var_list by the task holding each variable.

  Args:
    var_list: a list of variables or a dict {checkpoint name: variable or list
      of the slices of a partitioned variable}.

  Returns:
    {task: var_list of that task, in the form given}, or None when a value
    is not a variable (a saveable object) or a variable has no task.
  """
  items = var_list.items() if isinstance(var_list, dict) else [(None, v) for v in var_list]
  shards = collections.OrderedDict()
  for name, value in items:
    parts = list(value) if isinstance(value, (list, tuple)) else [value]
    for part in parts:
      if not isinstance(part, tf.Variable):
        return None
      task = _task_of(part)
      if task is None:
        return None
      if name is None:
        shards.setdefault(task, []).append(part)
      elif isinstance(value, (list, tuple)):
        shards.setdefault(task, collections.OrderedDict()).setdefault(name, []).append(part)
      else:
        shards.setdefault(task, collections.OrderedDict())[name] = part
  return shards


class ShardRestore:
  """Restore ops per ps task for the variables of one saver.

  Builds its ops in the default graph, so create it before the graph is
  finalised (before the Supervisor or MonitoredSession starts).

  Args:
    var_list: the saver's var_list (list, or dict as `model_deploy.savable_variables`).
    partial: False restores every variable whenever a restore is asked for
      (synchronous training), as TensorFlow does.
    name: name scope of the ops.
    snapshot_interval_secs: > 0 also keeps a snapshot of every shard on
      another ps (`deployment.shard_snapshots`), refreshed this often once
      `snapshots.start(sess)` runs; a lost shard whose holder kept its
      snapshot is restored from it instead of the checkpoint. 0: none.

  Attributes:
    snapshots: the `shard_snapshots.ShardSnapshots`, or None (disabled,
      fewer than two ps, or never partial).
  """

  def __init__(self, var_list, partial=True, name='shard_restore', snapshot_interval_secs=0):
    shards = _shards_of(var_list) if partial else None
    self._shards = []
    self.snapshots = None
    self._global_step = None
    if shards is None or len(shards) < 2:
      return
    by_task = collections.OrderedDict()
    with tf.compat.v1.name_scope(name):
      for task, shard_vars in shards.items():
        variables = (shard_vars if isinstance(shard_vars, list) else
                     [v for value in shard_vars.values()
                      for v in (value if isinstance(value, list) else [value])])
        by_task[task] = variables
        scope = task.strip('/').replace('/', '_').replace(':', '_')
        with tf.compat.v1.device(task):
          uninitialized = tf.compat.v1.report_uninitialized_variables(
              variables, name='%s_uninitialized' % scope)
        # Run only when a restore is asked for, which may be never.
        getattr(uninitialized, 'mark_used', lambda: None)()
        saver = tf.compat.v1.train.Saver(shard_vars, name='%s_saver' % scope,
                                         sharded=False, allow_empty=False)
        self._shards.append((task, len(variables), uninitialized, saver))
    if snapshot_interval_secs:
      self._global_step = tf.compat.v1.train.get_global_step()
      snapshots = shard_snapshots.ShardSnapshots(by_task, snapshot_interval_secs,
                                                 self._global_step)
      self.snapshots = snapshots if snapshots.enabled else None

  @property
  def tasks(self):
    """The tasks whose variables can be restored alone ([] when never partial)."""
    return [task for task, _, _, _ in self._shards]

  def restore(self, sess, save_path, restore_all):
    """Restores what the ps tasks of `sess` lost from `save_path`.

    Args:
      sess: a session on the cluster.
      save_path: the checkpoint prefix.
      restore_all: callable(sess, save_path) doing the usual full restore.

    Returns:
      The tasks whose variables were restored, from a snapshot or the
      checkpoint (every task on a full restore, [] when none), or None when
      this restore never goes by shard (`tasks` is empty).
    """
    if not self._shards:
      restore_all(sess, save_path)
      return None
    missing = sess.run([uninitialized for _, _, uninitialized, _ in self._shards])
    lost = [shard for shard, names in zip(self._shards, missing) if len(names)]
    if len(lost) == len(self._shards):
      restore_all(sess, save_path)
      return self.tasks
    kept = [shard for shard in self._shards if shard not in lost]
    kept_text = ', '.join('%s (%d variables)' % (task, count) for task, count, _, _ in kept)
    if not lost:
      logging.info('every ps holds its variables (%s): nothing restored from %s', kept_text,
                   save_path)
      return []
    lost_tasks = [task for task, _, _, _ in lost]
    step_now = self._surviving_step(sess, lost_tasks)
    if self.snapshots:
      gone = self.snapshots.note_lost(lost_tasks)
      if gone:
        logging.info('the snapshots of %s were lost with their holder: copied first from now '
                     'on', ', '.join(gone))
    for task, count, _, saver in lost:
      snapshot, why_not = (
          self.snapshots.restore(sess, task, lost_tasks, _step_of(save_path))
          if self.snapshots else (None, ''))
      if snapshot is not None:
        logging.warning('restored the %d variables of %s from its snapshot on %s (%s); kept '
                        'the current values of %s', count, task, snapshot.holder,
                        _snapshot_age(snapshot, step_now), kept_text)
        continue
      saver.restore(sess, save_path)
      logging.warning('restored the %d variables of %s from %s; kept the current values '
                      'of %s%s', count, task, save_path, kept_text,
                      ' (%s)' % why_not if why_not else '')
    return lost_tasks

  def _surviving_step(self, sess, lost_tasks):
    """The global step now when its ps kept it, else None (read before any restore)."""
    step = self._global_step
    if step is None or self.snapshots is None or _task_of(step) in lost_tasks:
      return None
    return int(sess.run(step))

  def saver_for(self, saver):
    """A stand-in for `saver` in `SessionManager.prepare_session` that restores by shard."""
    return _ShardRestoringProxy(saver, self)


def _step_of(save_path):
  """The global step a checkpoint prefix ends with ('.../model.ckpt-42' -> 42), or None."""
  match = re.search(r'-(\d+)$', save_path or '')
  return int(match.group(1)) if match else None


def _snapshot_age(snapshot, step_now):
  """'global step 50: 3.2 s, 10 steps old', without the steps when the step now is unknown.

  Args:
    snapshot: a `shard_snapshots.Snapshot`.
    step_now: the global step that survived the loss, or None (lost too).
  """
  age = '%.1f s' % snapshot.age_secs
  if snapshot.step is None:
    return age + ' old'
  if step_now is None:
    return 'global step %d: %s old' % (snapshot.step, age)
  return 'global step %d: %s, %d steps old' % (snapshot.step, age,
                                               max(0, step_now - snapshot.step))


class _ShardRestoringProxy:
  """What `SessionManager` uses of a saver: `restore` (by shard) and `recover_last_checkpoints`."""

  def __init__(self, saver, shard_restore):
    self._saver = saver
    self._shard_restore = shard_restore

  def restore(self, sess, save_path):
    self._shard_restore.restore(sess, save_path, self._saver.restore)

  def recover_last_checkpoints(self, checkpoint_paths):
    self._saver.recover_last_checkpoints(checkpoint_paths)

  def __getattr__(self, name):
    return getattr(self._saver, name)


class ShardRestoringSaver(tf.compat.v1.train.Saver):
  """A `tf.compat.v1.train.Saver` whose `restore` leaves live ps shards alone.

  Saving is the Saver's own. Takes the Saver's arguments, plus:

  Args:
    partial: False restores every variable, as the Saver does (synchronous
      training); True restores only the variables of the ps tasks that lost them.
    snapshot_interval_secs: as `ShardRestore`'s (0: no snapshots).
  """

  def __init__(self, var_list=None, partial=True, snapshot_interval_secs=0, **kwargs):
    super().__init__(var_list=var_list, **kwargs)
    self._shard_restore = ShardRestore(
        var_list if var_list is not None else tf.compat.v1.global_variables(),
        partial=partial, snapshot_interval_secs=snapshot_interval_secs)

  @property
  def snapshots(self):
    """The `shard_snapshots.ShardSnapshots` the chief starts, or None."""
    return self._shard_restore.snapshots

  def restore(self, sess, save_path):
    self._shard_restore.restore(
        sess, save_path, lambda s, p: tf.compat.v1.train.Saver.restore(self, s, p))
