"""Makes TensorFlow refuse a step as a repeated request id, for test_fault_runtime.py.

TensorFlow gives each step's RunGraph request an id from a random generator
that a new thread seeds with 4 bytes of /dev/urandom. The test runs this
program in a mount namespace of its own where /dev/urandom is SEED_FILE, a
file of 4 bytes the program rewrites: while the bytes stay the same, every
step draws the ids of the step before it, and the worker service refuses it
(`AbortedError: The same RunGraph (Worker) request was received twice`) as
it would refuse a real repeat of a long job.

    unshare -m sh -c 'mount --bind SEED_FILE /dev/urandom &&
                      exec python -m tests.deployment.repeated_request_main SEED_FILE'

It prints one JSON line per case:
- `raw`: a plain session's second step fails; what it raised, and whether
  `fault_tolerance.is_duplicate_request` knows it;
- `retried`: a `BoundedSession` step refused once, after which new bytes are
  written (from the warning it logs), so the run that follows draws new ids;
- `refused`: a `BoundedSession` step refused every time.

The graph lives on the one task of the server, so only the steps' own threads
draw request ids; Python's own randomness (getrandom) is untouched.
"""

import json
import logging as std_logging
import os
import sys

from absl import logging
import tensorflow as tf

from builders import deploy_config_builder
from deployment import cluster as cluster_lib
from deployment import fault_runtime
from deployment import fault_tolerance
from deployment import ports
from protos import pipeline_pb2

tf.compat.v1.disable_eager_execution()

FIXED_SEED = b'\x00\x00\x00\x00'


def _write_seed(path, seed):
  with open(path, 'r+b') as f:
    f.write(seed)


def _faults():
  chief, worker, ps = ['127.0.0.1:%d' % p for p in ports.pick_unused_ports(3)]
  cluster = cluster_lib.ClusterConfig(
      cluster={'chief': [chief], 'worker': [worker], 'ps': [ps]}, task_type='chief',
      task_index=0)
  return fault_runtime.TaskFaults(deploy_config_builder.cluster_timeouts(
      pipeline_pb2.DeployConfig(recovery_timeout_secs=3600)), cluster, is_chief=True)


class _NewSeedOnRefusal(std_logging.Handler):
  """Writes new bytes to the seed file when BoundedSession says it runs a step again."""

  def __init__(self, path):
    super().__init__()
    self._path = path

  def emit(self, record):
    if 'refused as a repeated request id' in record.getMessage():
      _write_seed(self._path, os.urandom(4))


def _raw_case(target, step):
  with tf.compat.v1.Session(target) as session:
    first = int(session.run(step))
    try:
      session.run(step)
    except tf.errors.OpError as e:
      return {'case': 'raw', 'first': first, 'error': type(e).__name__,
              'duplicate': fault_tolerance.is_duplicate_request(e),
              'refused_line': [line for line in e.message.splitlines()
                               if 'received twice' in line][:1]}
  return {'case': 'raw', 'first': first, 'error': None}


def _bounded_case(name, target, step, seed_path):
  faults = _faults()
  handler = _NewSeedOnRefusal(seed_path) if name == 'retried' else None
  if handler:
    logging.get_absl_logger().addHandler(handler)
  session = fault_runtime.BoundedSession(tf.compat.v1.Session(target), faults)
  result = {'case': name}
  try:
    result['value'] = int(session.run(step))
  except tf.errors.OpError as e:
    result['error'] = type(e).__name__
  finally:
    if handler:
      logging.get_absl_logger().removeHandler(handler)
  result['duplicate_requests'] = session.duplicate_requests
  result['recovering'] = bool(faults.recovery and faults.recovery.recovering)
  session.close()
  return result


def main(seed_path):
  address = '127.0.0.1:%d' % ports.pick_unused_ports(1)[0]
  server = tf.distribute.Server(tf.train.ClusterSpec({'worker': [address]}),
                                job_name='worker', task_index=0, start=True)
  with tf.Graph().as_default():
    with tf.compat.v1.device('/job:worker/task:0'):
      counter = tf.compat.v1.get_variable('counter', initializer=tf.constant(0, tf.int64),
                                          use_resource=True)
      step = counter.assign_add(1)
    _write_seed(seed_path, os.urandom(4))
    with tf.compat.v1.Session(server.target) as session:
      session.run(counter.initializer)
    _write_seed(seed_path, FIXED_SEED)
    print(json.dumps(_raw_case(server.target, step)), flush=True)
    print(json.dumps(_bounded_case('retried', server.target, step, seed_path)), flush=True)
    _write_seed(seed_path, FIXED_SEED)
    print(json.dumps(_bounded_case('refused', server.target, step, seed_path)), flush=True)


if __name__ == '__main__':
  main(sys.argv[1])
