"""A task of the netns harness tests (tests/deployment/test_netns.py).

`--role=server` (the `ps` task) serves a `tf.distribute.Server` for its
TF_CONFIG task until killed. `--role=probe` (the `worker` task) starts its own
server, puts a variable on `/job:ps/task:0` and then, until killed, reads it once per
`--interval_secs` with a deadline of `--deadline_ms`, printing one line per
attempt:

    PROBE <n> OK <value>
    PROBE <n> FAIL <error class>

so a test sees exactly when the ps became unreachable and when it came back.
"""

import argparse
import sys
import time

import tensorflow as tf

from deployment import cluster as cluster_lib


def probe(cluster, deadline_ms, interval_secs):
  server = cluster.start_server()
  with tf.compat.v1.device('/job:ps/task:0/device:CPU:0'):
    variable = tf.compat.v1.get_variable('probed', initializer=42.0, use_resource=True)
    read = variable.read_value()
  config = cluster.session_config()
  options = tf.compat.v1.RunOptions(timeout_in_ms=deadline_ms)
  with tf.compat.v1.Session(server.target, config=config) as sess:
    sess.run(variable.initializer)
    devices = sorted(d.name for d in sess.list_devices())
    print('DEVICES', ' '.join(devices), flush=True)
    attempt = 0
    while True:
      try:
        value = sess.run(read, options=options)
        print('PROBE %d OK %g' % (attempt, value), flush=True)
      except tf.errors.OpError as e:
        print('PROBE %d FAIL %s' % (attempt, type(e).__name__), flush=True)
      attempt += 1
      time.sleep(interval_secs)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--role', choices=['server', 'probe'], required=True)
  parser.add_argument('--deadline_ms', type=int, default=2000)
  parser.add_argument('--interval_secs', type=float, default=0.5)
  args = parser.parse_args()
  tf.compat.v1.disable_eager_execution()
  cluster = cluster_lib.ClusterConfig.from_tf_config()
  if args.role == 'server':
    cluster.start_server()
    print('SERVING', cluster.task_address, flush=True)
    while True:
      time.sleep(3600)
  probe(cluster, args.deadline_ms, args.interval_secs)


if __name__ == '__main__':
  sys.exit(main())
