"""Makes TensorFlow refuse a step as a repeated request id, for test_fault_runtime.py.

TensorFlow gives each step's RunGraph request an id from a random generator
that a new thread seeds with 4 bytes of /dev/urandom. The test runs this
program in a mount namespace of its own where /dev/urandom is SEED_FIFO, a
named pipe that a thread of this program keeps filled (`SeedPipe`): with
random bytes, every thread gets a seed of its own, as usual; with fixed
bytes, every step draws the ids of the step before it and the worker service
refuses it (`AbortedError: The same RunGraph (Worker) request was received
twice`), as it refuses a chance repeat in a long job.

    unshare -m sh -c 'mount --bind SEED_FIFO /dev/urandom &&
                      exec python -m tests.deployment.repeated_request_main SEED_FIFO'

It prints one JSON line per case:
- `raw`: a plain session's second step fails; what it raised, and whether
  `request_ids.is_duplicate_request` knows it;
- `retried`: a `BoundedSession` step refused once, after which the seeds are
  random again (from the warning it logs), so the run that follows draws new ids;
- `retried_callable`: the same through the callable `BoundedSession.make_callable`
  makes (a queue runner's enqueues);
- `refused`: a `BoundedSession` step refused every time;
- `poll_loops`: the ps serving loop and the chief's membership log poll on
  through refused polls, then take a worker's announcement and the chief's
  "training done".

Python's own randomness (getrandom) is untouched. The pipe is filled before
TensorFlow is imported: its libraries may read /dev/urandom as they load.
"""

import os
import sys
import threading
import time

FIXED_SEED = b'\x00\x00\x00\x00'


class SeedPipe(object):
  """Keeps the named pipe that is this process's /dev/urandom full of seeds.

  Args:
    path: the named pipe (opened here for reading and writing, so that
      readers never wait for a writer to appear).
  """

  def __init__(self, path):
    self._fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    self._lock = threading.Lock()
    self._fixed = False
    threading.Thread(target=self._fill, name='SeedPipe', daemon=True).start()

  def _fill(self):
    while True:
      with self._lock:
        try:
          os.write(self._fd, FIXED_SEED if self._fixed else os.urandom(4))
          continue
        except BlockingIOError:  # full: readers have plenty
          pass
      time.sleep(0.001)

  def fix(self, fixed):
    """Fixed (every reader the same bytes) or random seeds from now on."""
    with self._lock:
      self._fixed = fixed
      while True:  # drop the seeds of the other kind still in the pipe
        try:
          if not os.read(self._fd, 1 << 16):
            break
        except BlockingIOError:
          break


SEEDS = SeedPipe(sys.argv[1]) if __name__ == '__main__' else None

import json  # noqa: E402
import logging as std_logging  # noqa: E402

import tensorflow as tf  # noqa: E402

from builders import deploy_config_builder  # noqa: E402
from core import logs  # noqa: E402
from deployment import cluster as cluster_lib  # noqa: E402
from deployment import cluster_runtime  # noqa: E402
from deployment import elastic  # noqa: E402
from deployment import fault_runtime  # noqa: E402
from deployment import ports  # noqa: E402
from deployment import request_ids  # noqa: E402
from protos import pipeline_pb2  # noqa: E402

tf.compat.v1.disable_eager_execution()

# The ps loop polls every 2 s, the chief's membership log every 1 s.
POLL_SECS = 2.0


def _faults():
  chief, worker, ps = ['127.0.0.1:%d' % p for p in ports.pick_unused_ports(3)]
  cluster = cluster_lib.ClusterConfig(
      cluster={'chief': [chief], 'worker': [worker], 'ps': [ps]}, task_type='chief',
      task_index=0)
  return fault_runtime.TaskFaults(deploy_config_builder.cluster_timeouts(
      pipeline_pb2.DeployConfig(recovery_timeout_secs=3600)), cluster, is_chief=True)


class _RandomSeedsOnRefusal(std_logging.Handler):
  """Makes the seeds random again when BoundedSession says it runs a step again."""

  def emit(self, record):
    if 'refused as a repeated request id' in record.getMessage():
      SEEDS.fix(False)


def _raw_case(target, step):
  with tf.compat.v1.Session(target) as session:
    first = int(session.run(step))
    try:
      session.run(step)
    except tf.errors.OpError as e:
      return {'case': 'raw', 'first': first, 'error': type(e).__name__,
              'duplicate': request_ids.is_duplicate_request(e),
              'refused_line': [line for line in e.message.splitlines()
                               if 'received twice' in line][:1]}
  return {'case': 'raw', 'first': first, 'error': None}


def _bounded_case(name, target, step):
  faults = _faults()
  handler = _RandomSeedsOnRefusal() if name.startswith('retried') else None
  if handler:
    logs.logger().addHandler(handler)
  session = fault_runtime.BoundedSession(tf.compat.v1.Session(target), faults)
  result = {'case': name}
  try:
    # A queue runner calls what `make_callable` made, not `run`.
    run = session.make_callable(step) if name.endswith('callable') else (
        lambda: session.run(step))
    result['value'] = int(run())
  except tf.errors.OpError as e:
    result['error'] = type(e).__name__
  finally:
    if handler:
      logs.logger().removeHandler(handler)
  result['duplicate_requests'] = session.duplicate_requests
  result['recovering'] = bool(faults.recovery and faults.recovery.recovering)
  session.close()
  return result


def _poll_loops_case():
  """The ps loop and the chief's membership log poll on through refused polls.

  A chief and a ps server in this process: the ps runs its serving loop in the
  main thread (it installs a SIGTERM handler), the chief its membership log.
  While the seed is fixed every poll repeats the ids of the one before; then,
  with new bytes, a worker announces itself and the chief tells the ps that
  training is done.
  """
  chief_address, ps_address, worker_address = [
      '127.0.0.1:%d' % p for p in ports.pick_unused_ports(3)]
  jobs = {'chief': [chief_address], 'ps': [ps_address]}
  spec = tf.train.ClusterSpec(jobs)
  chief = tf.distribute.Server(spec, job_name='chief', task_index=0, start=True)
  ps = tf.distribute.Server(spec, job_name='ps', task_index=0, start=True)
  chief_cluster = cluster_lib.ClusterConfig(cluster=jobs, task_type='chief', task_index=0)
  ps_cluster = cluster_lib.ClusterConfig(cluster=jobs, task_type='ps', task_index=0)
  worker_cluster = cluster_lib.ClusterConfig(
      cluster=dict(jobs, worker=[worker_address]), task_type='worker', task_index=0)
  members = elastic.MembershipLog(chief_cluster, chief.target).start()

  def drive():
    time.sleep(1.0)
    SEEDS.fix(True)
    time.sleep(3 * POLL_SECS)  # at least two polls of each loop: the later ones refused
    SEEDS.fix(False)
    elastic.announce(worker_cluster, elastic.JOINED)
    cluster_runtime.signal_training_done(chief.target, chief_cluster)

  driver = threading.Thread(target=drive, daemon=True)
  driver.start()
  result = {'case': 'poll_loops'}
  try:
    result['ps_exit'] = cluster_runtime.serve_until_training_done(
        ps, ps_cluster, chief_timeout_secs=60, chief_seen=True)
  except Exception as e:  # pylint: disable=broad-except
    result['ps_error'] = '%s: %s' % (type(e).__name__, str(e).splitlines()[:1])
  driver.join(30)
  time.sleep(POLL_SECS)  # the membership log's poll that takes the announcement
  result['members'] = sorted(members.members)
  result['membership_log_running'] = members.running()
  members.stop()
  return result


def main():
  address = '127.0.0.1:%d' % ports.pick_unused_ports(1)[0]
  server = tf.distribute.Server(tf.train.ClusterSpec({'worker': [address]}),
                                job_name='worker', task_index=0, start=True)
  with tf.Graph().as_default():
    with tf.compat.v1.device('/job:worker/task:0'):
      counter = tf.compat.v1.get_variable('counter', initializer=tf.constant(0, tf.int64),
                                          use_resource=True)
      step = counter.assign_add(1)
    with tf.compat.v1.Session(server.target) as session:
      session.run(counter.initializer)
    SEEDS.fix(True)
    print(json.dumps(_raw_case(server.target, step)), flush=True)
    print(json.dumps(_bounded_case('retried', server.target, step)), flush=True)
    SEEDS.fix(True)
    print(json.dumps(_bounded_case('retried_callable', server.target, step)), flush=True)
    SEEDS.fix(True)
    print(json.dumps(_bounded_case('refused', server.target, step)), flush=True)
  SEEDS.fix(False)
  print(json.dumps(_poll_loops_case()), flush=True)


if __name__ == '__main__':
  main()
