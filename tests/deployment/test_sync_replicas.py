"""Sync replicas whose count changes while the job runs (deployment/sync_replicas.py).

Two replicas on an in-process cluster (one ps and two worker servers, a graph
and a session per replica, as two worker processes would have): with one
replica gone, the rounds stop; once the chief's resizer says one replica, the
step that was waiting completes and the survivor trains alone; a replica back
and the count raised again, both train.
"""

import sys
import threading
import time

import pytest
import tensorflow as tf

from deployment import ports
from deployment import sync_replicas

tf.compat.v1.disable_eager_execution()

# Far above what a step takes; only a failure waits this long.
_STEP_SECS = 30


class _Replica(object):
  """One replica's graph and session: w on the ps, (w - 3)^2, sync SGD."""

  def __init__(self, target, task, replicas, to_aggregate=None):
    self.graph = tf.Graph()
    with self.graph.as_default(), tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(
        ps_tasks=1, worker_device='/job:worker/task:%d' % task)):
      self.global_step = tf.compat.v1.train.get_or_create_global_step()
      w = tf.compat.v1.get_variable('w', [], initializer=tf.compat.v1.zeros_initializer(),
                                    use_resource=True)
      self.optimizer = sync_replicas.SyncReplicasOptimizer(
          tf.compat.v1.train.GradientDescentOptimizer(0.1),
          replicas_to_aggregate=to_aggregate or replicas, total_num_replicas=replicas,
          resizable=True)
      loss = tf.square(w - 3.0)
      self.train_op = self.optimizer.apply_gradients(
          self.optimizer.compute_gradients(loss), global_step=self.global_step)
      self.init = tf.compat.v1.global_variables_initializer()
      self.init_tokens = self.optimizer.get_init_tokens_op()
    self.sess = tf.compat.v1.Session(target, graph=self.graph)

  def step(self):
    return self.sess.run(self.train_op, options=tf.compat.v1.RunOptions(
        timeout_in_ms=_STEP_SECS * 1000))

  def global_step_value(self):
    return int(self.sess.run(self.global_step))


@pytest.fixture
def cluster():
  ps_port, *worker_ports = ports.pick_unused_ports(3)
  spec = tf.train.ClusterSpec({'ps': ['127.0.0.1:%d' % ps_port],
                               'worker': ['127.0.0.1:%d' % p for p in worker_ports]})
  servers = [tf.distribute.Server(spec, job_name='ps', task_index=0)]
  servers += [tf.distribute.Server(spec, job_name='worker', task_index=i) for i in range(2)]
  return servers


def _start_chief(chief):
  """What the chief's Supervisor does: init, the chief's queue runner, the first tokens."""
  chief.sess.run(chief.init)
  chief.sess.run(chief.optimizer.chief_init_op)
  coord = tf.train.Coordinator()
  threads = chief.optimizer.get_chief_queue_runner().create_threads(
      chief.sess, coord=coord, daemon=True, start=True)
  chief.sess.run(chief.init_tokens)
  return coord, threads


class _Training(object):
  """Replicas stepping in threads until `stop`, as their training loops would."""

  def __init__(self, chief, replicas):
    self._chief = chief
    self._stop = threading.Event()
    self.errors = []
    self.steps = 0  # of every replica together
    self._threads = [threading.Thread(target=self._loop, args=(r,), daemon=True)
                     for r in replicas]
    for thread in self._threads:
      thread.start()

  def _loop(self, replica):
    try:
      while not self._stop.is_set():
        replica.step()
        self.steps += 1
    except Exception as e:  # pylint: disable=broad-except  (reported by the test)
      self.errors.append(e)

  def wait_for_step(self, step, timeout=_STEP_SECS):
    """Waits until the global step reaches `step`; returns whether it did."""
    deadline = time.time() + timeout
    while self._chief.global_step_value() < step and time.time() < deadline:
      time.sleep(0.05)
    return self._chief.global_step_value() >= step

  def stop(self):
    """Stops the loops; the chief's last tokens free a step waiting for its round."""
    self._stop.set()
    self._chief.optimizer.release_workers(self._chief.sess)
    for thread in self._threads:
      thread.join(_STEP_SECS)
    assert not any(t.is_alive() for t in self._threads) and not self.errors, self.errors


def test_the_chief_resizes_a_running_sync_job_at_a_step_boundary(cluster):
  chief = _Replica(cluster[1].target, 0, replicas=2)
  other = _Replica(cluster[2].target, 1, replicas=2)
  coord, threads = _start_chief(chief)
  resizer = sync_replicas.ReplicaResizer(replicas=2)
  try:
    resizer.attach(chief.sess, chief.optimizer)
    assert chief.optimizer.counts.read(chief.sess) == (2, 2)
    other.sess.run(other.optimizer.local_step_init_op)
    both = _Training(chief, [chief, other])
    assert both.wait_for_step(5)
    both.stop()
    # The other replica is gone. TF's rounds take 2 gradients whoever sends them and
    # hand out 2 tokens: the chief goes on alone, 2 of its steps to a global step.
    alone = _Training(chief, [chief])
    start = chief.global_step_value()
    assert alone.wait_for_step(start + 40)
    steps, rounds = alone.steps, chief.global_step_value() - start
    assert 1.8 <= steps / rounds <= 2.2, (steps, rounds)
    # One replica: a round takes 1 gradient, every step of the chief is a global step.
    resizer.set_replicas(1)
    assert chief.optimizer.counts.read(chief.sess) == (1, 1)
    steps, start = alone.steps, chief.global_step_value()
    assert alone.wait_for_step(start + 40)
    steps, rounds = alone.steps - steps, chief.global_step_value() - start
    assert 0.9 <= steps / rounds <= 1.1, (steps, rounds)
    alone.stop()
    # The other replica is back: two again, and both train.
    before = chief.global_step_value()
    other.sess.run(other.optimizer.local_step_init_op)
    resizer.set_replicas(2)
    assert chief.optimizer.counts.read(chief.sess) == (2, 2)
    both = _Training(chief, [chief, other])
    assert both.wait_for_step(before + 5)
    both.stop()
  finally:
    coord.request_stop()
    chief.optimizer.release_workers(chief.sess)
    coord.join(threads, stop_grace_period_secs=5)


def test_backup_replicas_stay_what_the_configuration_gave(cluster):
  # 3 replicas of which a round takes 2: one backup, at every count.
  chief = _Replica(cluster[1].target, 0, replicas=3, to_aggregate=2)
  chief.sess.run(chief.init)
  chief.sess.run(chief.optimizer.chief_init_op)
  counts = chief.optimizer.counts
  assert counts.read(chief.sess) == (2, 3)
  counts.assign(chief.sess, 5)
  assert counts.read(chief.sess) == (4, 5)
  counts.assign(chief.sess, 1)
  assert counts.read(chief.sess) == (1, 1)  # never fewer than one gradient a round
  # A session's chief_init_op starts from the configured counts again.
  chief.sess.run(chief.optimizer.chief_init_op)
  assert counts.read(chief.sess) == (2, 3)


def test_a_chief_session_ended_by_an_error_leaves_the_job_trainable_in_a_new_one(cluster):
  # What tf-slim does after an AbortedError in the chief's session ("Retrying
  # training!"): the chief's coordinator stops with the error, then a new session on
  # the same graph runs the init ops and the first tokens again. TF's queue runner
  # closed the token queue on that stop, so the new session's first tokens failed
  # (`FIFOQueue 'sync_token_q' is closed`) and a worker waiting for a token stopped
  # training with OutOfRangeError.
  chief = _Replica(cluster[1].target, 0, replicas=2)
  other = _Replica(cluster[2].target, 1, replicas=2)
  coord, threads = _start_chief(chief)
  other.sess.run(other.optimizer.local_step_init_op)
  both = _Training(chief, [chief, other])
  assert both.wait_for_step(5)
  both.stop()
  try:
    raise tf.errors.AbortedError(None, None, 'a session aborted')
  except tf.errors.AbortedError as e:
    coord.request_stop(e)
  with pytest.raises(tf.errors.AbortedError):
    coord.join(threads, stop_grace_period_secs=5)
  chief.sess.close()

  chief.sess = tf.compat.v1.Session(cluster[1].target, graph=chief.graph)
  before = chief.global_step_value()
  coord, threads = _start_chief(chief)
  try:
    both = _Training(chief, [chief, other])
    assert both.wait_for_step(before + 5), both.errors
    both.stop()
  finally:
    coord.request_stop()
    chief.optimizer.release_workers(chief.sess)
    coord.join(threads, stop_grace_period_secs=5)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
