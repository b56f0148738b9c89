r"""Does a ps leak memory as workers join and leave a running job? (issue 29; not a test)

A ps process serves one 4 MB variable; the chief (this process) initialises it. Then,
`--cycles` times (in batches of `--parallel` that join together; every batch costs
TensorFlow imports), a new worker process joins the running job the way
`deployment/elastic.py` makes a `python -m trainer.train` worker join (its server boots
as `slimtrain_joining`, its sessions carry its cluster to the ps with state shared),
runs `--steps` updates that send a tensor computed on the joiner to the ps and read the
variable back, and exits: half of them on SIGTERM (the process is ended while its
session is open), half by closing their session. After each cycle the ps's resident
memory (VmRSS from /proc), threads and open file descriptors are read.

    python -m benchmarks.elastic_ps_memory --cycles=50

prints one line per batch and then the growth between the mean of the first and the
last third of the batches. Every joiner has its own port, as on Kubernetes every new pod has its
own address, so the ps sees 50 workers it never heard of.

Differs on purpose from a timed test: it measures, it does not assert; the numbers go to
benchmarks/RESULTS.md.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

_SIZE = 1024 * 1024  # floats: 4 MB


def _rss_mb(pid):
  with open('/proc/%d/status' % pid) as f:
    for line in f:
      if line.startswith('VmRSS:'):
        return int(line.split()[1]) / 1024.0
  return float('nan')


def _threads_and_fds(pid):
  """(threads, open file descriptors) of process `pid`: gRPC state that could pile up."""
  return len(os.listdir('/proc/%d/task' % pid)), len(os.listdir('/proc/%d/fd' % pid))


def _variable(tf):
  with tf.compat.v1.device('/job:ps/task:0'):
    return tf.compat.v1.get_variable('shared', shape=[_SIZE], use_resource=True,
                                     initializer=tf.compat.v1.zeros_initializer())


def _serve_ps():
  from deployment import cluster as cluster_lib
  cluster_lib.ClusterConfig.from_tf_config().start_server().join()


def _join(steps, linger):
  """A joining worker: boots as a joiner, runs `steps` updates, then lingers or exits."""
  import tensorflow as tf
  from deployment import cluster as cluster_lib
  tf.compat.v1.disable_eager_execution()
  cluster = cluster_lib.ClusterConfig.from_tf_config()
  cluster.start_server(joining=True)
  variable = _variable(tf)
  with tf.compat.v1.device('/job:worker/task:%d' % cluster.task_index):
    delta = tf.random.uniform([_SIZE]) * 1e-3
  update = variable.assign_add(delta)
  with tf.compat.v1.Session(cluster.master, config=cluster.session_config()) as session:
    for _ in range(steps):
      session.run(update)
    print('JOINED_AND_TRAINED', flush=True)
    if linger:
      time.sleep(3600)  # ended by SIGTERM with its session open


def _env(cluster, job, index):
  env = dict(os.environ, CUDA_VISIBLE_DEVICES='', TF_CPP_MIN_LOG_LEVEL='2',
             TF_CONFIG=json.dumps({'cluster': cluster, 'task': {'type': job, 'index': index}}))
  return env


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--role', default='driver', choices=['driver', 'ps', 'joiner'])
  parser.add_argument('--cycles', type=int, default=50)
  parser.add_argument('--steps', type=int, default=20)
  parser.add_argument('--linger', type=int, default=0)
  parser.add_argument('--parallel', type=int, default=5,
                      help='joiners that join (and then leave) together in one cycle')
  args = parser.parse_args()
  if args.role == 'ps':
    return _serve_ps()
  if args.role == 'joiner':
    return _join(args.steps, args.linger)

  import tensorflow as tf
  from deployment import cluster as cluster_lib
  from deployment import ports
  tf.compat.v1.disable_eager_execution()
  chief, ps, worker0 = ports.loopback_addresses(3)
  cluster = {'chief': [chief], 'ps': [ps], 'worker': [worker0]}
  command = [sys.executable, '-m', 'benchmarks.elastic_ps_memory']
  ps_process = subprocess.Popen(command + ['--role=ps'], env=_env(cluster, 'ps', 0))
  try:
    chief_config = cluster_lib.ClusterConfig.from_tf_config(
        {'TF_CONFIG': json.dumps({'cluster': cluster, 'task': {'type': 'chief', 'index': 0}})})
    chief_config.start_server()
    variable = _variable(tf)
    with tf.compat.v1.Session(chief_config.master,
                              config=chief_config.session_config()) as session:
      session.run(variable.initializer)
    print('ps RSS after the chief initialised: %.1f MB' % _rss_mb(ps_process.pid), flush=True)
    rss = []
    joined = 0
    while joined < args.cycles:
      batch = []
      size = min(args.parallel, args.cycles - joined)
      # Workers 1..size join together, each at a new address (as new pods would be).
      grown = dict(cluster, worker=cluster['worker'] + ports.loopback_addresses(size))
      for index in range(1, size + 1):
        linger = joined % 2
        batch.append((joined, linger, subprocess.Popen(
            command + ['--role=joiner', '--steps=%d' % args.steps, '--linger=%d' % linger],
            env=_env(grown, 'worker', index), stdout=subprocess.PIPE, text=True)))
        joined += 1
      for cycle, linger, joiner in batch:
        if joiner.stdout.readline().strip() != 'JOINED_AND_TRAINED':
          raise RuntimeError('joiner %d failed (exit %s)' % (cycle, joiner.wait()))
        if linger:
          joiner.send_signal(signal.SIGTERM)
      codes = [joiner.wait(timeout=300) for _, _, joiner in batch]
      time.sleep(1.0)
      rss.append(_rss_mb(ps_process.pid))
      print('%2d joins/leaves (exits %s), ps RSS %.1f MB, threads %d, fds %d' % (
          (joined, codes, rss[-1]) + _threads_and_fds(ps_process.pid)), flush=True)
    window = max(len(rss) // 3, 1)
    first, last = np.mean(rss[:window]), np.mean(rss[-window:])
    between = (len(rss) - window) * args.parallel
    print('ps RSS: mean after the first %d batches %.1f MB, after the last %d %.1f MB: '
          '%+.1f MB over %d joins/leaves (%+.2f MB per join/leave)' % (
              window, first, window, last, last - first, between,
              (last - first) / max(between, 1)))
  finally:
    ps_process.kill()
    ps_process.wait()


if __name__ == '__main__':
  main()
