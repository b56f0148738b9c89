"""Fresh copies of each ps shard, held by another ps, for the restore after a lost ps.

`deployment.shard_restore` restores the variables of a ps that came back
empty from the latest checkpoint, which may be `save_interval_secs` (600 s
by default) old. `ShardSnapshots` keeps a much younger copy: the shard of
ps task i is mirrored on its *holder*, the next ps task in the ring of
tasks that hold variables (for round robin placement, ps (i + 1) mod P),
and a daemon thread of the chief refreshes every copy every
`deploy_config.snapshot_interval_secs` seconds. Beside each copy the holder
keeps the global step read at the copy and the holder's wall time, so a
restore can say how old what it restored is.

The snapshot variables are in no collection: checkpoints, the ready op and
`report_uninitialized_variables` never see them, and nothing initialises
them but the first copy. A copy is an ordinary `Session.run` on the chief's
session from its own thread, so training steps go on meanwhile (a ps serves
both); a copy that meets a lost ps fails alone, and the thread tries again
at the next round. A holder that was lost comes back empty, so its copies
are uninitialised: the restore then takes the checkpoint. The stamp (step
and time) is written after the values, so an initialised stamp means a
whole copy was written at least once. The copies such a holder lost are
the first of every round until each is written again (`note_lost`): until
then a second loss would fall back to the checkpoint.

Costs: each ps holds the shard of its predecessor too (twice its memory),
and each round sends every shard once over the network between ps tasks.
With a single ps there is no other ps to hold its copy: the checkpoint is
the only source (the chief's memory is not used as a holder).

Usage (`deployment.shard_restore.ShardRestore` builds one when asked):

    snapshots = shard_snapshots.ShardSnapshots(
        {'/job:ps/task:0': [w0, global_step], '/job:ps/task:1': [w1]},
        interval_secs=5)
    snapshots.start(sess)        # the chief, once its session is ready
    ...
    source = snapshots.restore(sess, '/job:ps/task:1', lost_tasks)
    snapshots.stop()             # end of training, or before a new session

Differs on purpose from the checkpoint: in memory only (a copy does not
survive its holder), never written to disk, and taken while training steps
run (in asynchronous training a copy mixes values of neighbouring steps, as
the training reads themselves do).
"""

import collections
import threading
import time

from core import logs as logging
import tensorflow as tf

# How long one copy may take before its round gives up (a ps cut off hangs).
COPY_TIMEOUT_SECS = 60.0
# How long `stop` waits for a copy in flight before leaving the thread behind
# (it ends after that copy; a copy on the old session cannot harm the new one).
STOP_WAIT_SECS = 2.0

# One restore from a snapshot: the holder, the global step and wall time of
# the copy (step None without a global step), and its age in seconds.
Snapshot = collections.namedtuple('Snapshot', ['holder', 'step', 'wall_time', 'age_secs'])

# The ops of one shard's copy: where it is held, what copies and restores it.
_Shard = collections.namedtuple(
    '_Shard', ['task', 'holder', 'copy', 'restore', 'stamped', 'step', 'wall_time'])


def _short(message):
  """The gist of an error message: its lines after 'Graph execution error:', 200 characters."""
  text = ' '.join(line.strip() for line in str(message).splitlines() if line.strip())
  text = text.replace('Graph execution error:', '').strip()
  return text if len(text) <= 200 else text[:197] + '...'


def pause_after(round_secs, interval_secs):
  """Seconds to wait after a round of `round_secs`: rounds start `interval_secs` apart.

  A round that took longer than the interval is followed at once. Counting the
  interval from a round's start, not its end, keeps a copy at most about
  max(interval, round) old at its holder instead of interval + round (a
  94 MB model's rounds took 8-17 s on a loaded machine, benchmarks/RESULTS.md).

  Args:
    round_secs: how long the round just finished took.
    interval_secs: `snapshot_interval_secs`.
  """
  return max(0.0, interval_secs - round_secs)


def _scope_of(task):
  """'/job:ps/task:1' -> 'job_ps_task_1', for op names."""
  return task.strip('/').replace('/', '_').replace(':', '_')


def _holders(tasks):
  """{task: the next task in the sorted ring}, or {} with fewer than two tasks."""
  ring = sorted(tasks, key=lambda t: (tf.DeviceSpec.from_string(t).job or '',
                                      tf.DeviceSpec.from_string(t).task or 0))
  if len(ring) < 2:
    return {}
  return {task: ring[(i + 1) % len(ring)] for i, task in enumerate(ring)}


def _mirror(variable, name):
  """A variable of `variable`'s shape and dtype in no collection, never initialised by us.

  Returns None when the shape is not fully known (no copy can be preallocated).
  """
  if not variable.shape.is_fully_defined():
    return None
  dtype = variable.dtype.base_dtype
  return tf.compat.v1.Variable(
      tf.zeros(variable.shape, dtype), trainable=False, collections=[], name=name,
      dtype=dtype)


def _read(variable):
  """`variable`'s value, read on its own device (a resource is read where it lives)."""
  with tf.compat.v1.device(variable.device):
    return tf.identity(variable.read_value())


def _build_shard(task, holder, variables, global_step):
  """The snapshot variables of one shard on `holder`, and the ops that copy and restore them.

  Returns:
    A `_Shard`, or None when a variable's shape is not fully known.
  """
  scope = _scope_of(task)
  # Fixed names, outside any scope: the legacy trainer builds a new graph
  # after a lost ps, and its variables must find the same state on the holder.
  with tf.compat.v1.name_scope(None), tf.compat.v1.device(holder):
    mirrors = [_mirror(v, 'shard_snapshot/%s/v%d' % (scope, i)) for i, v in enumerate(variables)]
    if any(m is None for m in mirrors):
      return None
    step = tf.compat.v1.Variable(tf.constant(-1, tf.int64), trainable=False, collections=[],
                                 name='shard_snapshot/%s/step' % scope)
    wall_time = tf.compat.v1.Variable(tf.constant(0.0, tf.float64), trainable=False,
                                      collections=[], name='shard_snapshot/%s/wall_time' % scope)
  with tf.compat.v1.name_scope('shard_snapshot/%s/' % scope):
    # The step is read before the values: the stamp is never younger than them.
    step_now = (tf.cast(_read(global_step), tf.int64) if global_step is not None
                else tf.constant(-1, tf.int64))
    with tf.control_dependencies([step_now]):
      values = [_read(v) for v in variables]
    with tf.compat.v1.device(holder):
      copies = [m.assign(value, read_value=False) for m, value in zip(mirrors, values)]
      # Stamped last: an initialised stamp means a whole copy was written once.
      with tf.control_dependencies(copies):
        stamp = tf.group(step.assign(step_now, read_value=False),
                         wall_time.assign(tf.timestamp(), read_value=False), name='copy')
      stamped = tf.compat.v1.is_variable_initialized(step)
      # Run only at a restore, which may never come.
      getattr(stamped, 'mark_used', lambda: None)()
    saved = [_read(m) for m in mirrors]
    with tf.compat.v1.device(task):
      restore = tf.group(*[v.assign(value, read_value=False)
                           for v, value in zip(variables, saved)], name='restore')
  return _Shard(task, holder, stamp, restore, stamped, step, wall_time)


class ShardSnapshots:
  """Snapshot variables of every ps shard on its holder, and the chief's copy thread.

  Builds its ops in the default graph, so create it before the graph is
  finalised. Builds nothing with fewer than two tasks (`enabled` is False).

  Args:
    shards: {task: list of that task's variables}.
    interval_secs: seconds between two copies of every shard (> 0).
    global_step: the global step variable (its value stamps each copy), or None.
  """

  def __init__(self, shards, interval_secs, global_step=None):
    self.interval_secs = float(interval_secs)
    self._shards = {}
    for task, holder in _holders(list(shards)).items():
      shard = _build_shard(task, holder, list(shards[task]), global_step)
      if shard is None:
        logging.warning('no snapshot of %s: a variable has no fully known shape', task)
        continue
      self._shards[task] = shard
    self._thread = None
    self._stop = None
    self._lock = threading.Lock()
    self._missing = set()  # Shards whose holder came back empty: copied first.
    self.rounds = 0  # Rounds the thread finished (a skipped shard included).

  @property
  def enabled(self):
    return bool(self._shards)

  def holder_of(self, task):
    """The task holding `task`'s snapshot, or None."""
    shard = self._shards.get(task)
    return shard and shard.holder

  def note_lost(self, lost_tasks):
    """Notes that `lost_tasks` came back empty: the copies they held go first from now on.

    Args:
      lost_tasks: the ps tasks that lost their variables (and so the copies they held).

    Returns:
      The tasks whose copy is gone, sorted.
    """
    gone = {task for task, shard in self._shards.items() if shard.holder in lost_tasks}
    with self._lock:
      self._missing |= gone
    return sorted(gone)

  def copy_order(self):
    """The tasks in the order the next round copies them: those without a copy first."""
    with self._lock:
      missing = set(self._missing)
    return sorted(self._shards, key=lambda task: (task not in missing, task))

  def copy(self, sess, timeout_secs=COPY_TIMEOUT_SECS):
    """Copies every shard to its holder now, one `Session.run` per shard.

    A shard whose copy its holder lost (`note_lost`) is copied first: in a
    round slowed by a new session, it is the one a second loss would need.

    Args:
      sess: a session on the cluster.
      timeout_secs: the longest one copy may take.

    Returns:
      {task: None when copied, else the error's text}, in the order copied
      (a lost ps skips its shards).
    """
    options = tf.compat.v1.RunOptions(timeout_in_ms=int(timeout_secs * 1000))
    outcome = {}
    for task in self.copy_order():
      try:
        sess.run(self._shards[task].copy, options=options)
        outcome[task] = None
        with self._lock:
          self._missing.discard(task)
      except tf.errors.OpError as e:
        outcome[task] = '%s: %s' % (type(e).__name__, _short(e.message))
    return outcome

  def start(self, sess):
    """Starts the copy thread on `sess` (a no-op when it already runs on `sess`).

    Stops a thread that runs on another session first.
    """
    with self._lock:
      if not self._shards:
        return
      if self._thread is not None and self._thread.is_alive() and self._thread.sess is sess:
        return
    self.stop()
    with self._lock:
      self._stop = threading.Event()
      self._thread = threading.Thread(target=self._run, args=(sess, self._stop),
                                      name='shard_snapshots', daemon=True)
      self._thread.sess = sess
      self._thread.start()
    logging.info('snapshots of the ps shards every %g s: %s', self.interval_secs, ', '.join(
        '%s on %s' % (task, shard.holder) for task, shard in sorted(self._shards.items())))

  def stop(self, wait_secs=STOP_WAIT_SECS):
    """Stops the copy thread; waits at most `wait_secs` for a copy in flight.

    Returns:
      Whether the thread ended (False: a hung copy keeps a daemon thread alive).
    """
    with self._lock:
      thread, stop, self._thread = self._thread, self._stop, None
    if thread is None:
      return True
    stop.set()
    thread.join(wait_secs)
    return not thread.is_alive()

  @property
  def running(self):
    thread = self._thread
    return thread is not None and thread.is_alive()

  def _run(self, sess, stop):
    """The thread: a round at once, then one every `interval_secs` (`pause_after`), until `stop`.

    Ends as well when the session is closed under it (a lost peer broke it).
    """
    failing = set()
    first = True
    while not stop.is_set():
      started = time.time()
      try:
        outcome = self.copy(sess)
      except RuntimeError:  # The session was closed under the thread: its end.
        return
      if first and not stop.is_set():
        # The first round of a session tells how long a shard stays without a copy.
        logging.info('snapshots: first round on this session took %.1f s (in order: %s)',
                     time.time() - started, ', '.join(
                         '%s %s' % (task, 'copied' if error is None else 'skipped')
                         for task, error in outcome.items()))
        first = False
      for task, error in outcome.items():
        if stop.is_set():
          return
        if error is None:
          failing.discard(task)
        elif task not in failing:  # Once per run of failures: a lost ps fails every round.
          failing.add(task)
          logging.warning('snapshot of %s skipped this round (%s)', task, error)
      self.rounds += 1
      stop.wait(pause_after(time.time() - started, self.interval_secs))

  def restore(self, sess, task, lost_tasks, checkpoint_step=None):
    """Restores `task`'s variables from its snapshot, when its holder still has one.

    Args:
      sess: a session on the cluster, every ps reachable.
      task: the lost task whose variables to restore.
      lost_tasks: every task that came back empty (a lost holder has no snapshot).
      checkpoint_step: the global step of the checkpoint the other source
        would be, or None; a snapshot of an earlier step is not used.

    Returns:
      (a `Snapshot` when restored, else None; why not, or '' when restored).
    """
    shard = self._shards.get(task)
    if shard is None:
      return None, 'no snapshot of %s' % task
    if shard.holder in lost_tasks:
      return None, 'no live snapshot: %s was lost too' % shard.holder
    if not sess.run(shard.stamped):
      return None, 'no snapshot on %s yet' % shard.holder
    step, wall_time = (v.item() for v in sess.run([shard.step, shard.wall_time]))
    step = step if step >= 0 else None
    if step is not None and checkpoint_step is not None and step < checkpoint_step:
      return None, 'its snapshot on %s is of global step %d, older' % (shard.holder, step)
    sess.run(shard.restore)
    return Snapshot(shard.holder, step, wall_time, time.time() - wall_time), ''
