"""One task of the loopback cluster test (tests/deployment/test_cluster_training.py).

Reads TF_CONFIG. A ps task serves until it is killed. A worker builds a
model_deploy graph with its variables on the ps, trains `--steps` async SGD
steps, waits until every worker's steps reached the shared global step, then
prints one line `RESULT <json>` with what the test checks: the variables'
devices in the graph and in the partition graphs TensorFlow executed, whether
a same-named variable exists (is initialised) on this worker or on the ps, and
its losses and global steps.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import tensorflow as tf
import tf_slim as slim

from deployment import cluster as cluster_lib
from deployment import model_deploy


def _model_fn(x, y):
  hidden = slim.fully_connected(
      tf.constant(x), 8, activation_fn=tf.nn.relu, scope='hidden',
      weights_initializer=tf.compat.v1.glorot_uniform_initializer(seed=1))
  prediction = slim.fully_connected(hidden, 1, activation_fn=None, scope='output')
  tf.compat.v1.losses.mean_squared_error(tf.constant(y), prediction)


def _initialized_on(variables, device):
  """Ops telling whether a variable with each one's shared name is on `device`."""
  checks = []
  with tf.compat.v1.device(device):
    for var in variables:
      handle = tf.raw_ops.VarHandleOp(
          dtype=var.dtype.base_dtype, shape=var.shape,
          shared_name=var.handle.op.get_attr('shared_name'), container='')
      checks.append(tf.raw_ops.VarIsInitializedOp(resource=handle))
  return checks


def run_worker(cluster, steps, timeout):
  server = cluster.start_server()
  x = np.random.RandomState(0).randn(16, 4).astype(np.float32)
  y = x.sum(axis=1, keepdims=True).astype(np.float32) * 0.5
  config = model_deploy.DeploymentConfig(
      num_clones=1, clone_on_cpu=True, replica_id=cluster.task_index,
      num_replicas=cluster.num_worker_replicas, num_ps_tasks=cluster.num_ps_tasks,
      worker_job_name=cluster.worker_job_name)
  model = model_deploy.deploy(
      config, _model_fn, [x, y],
      optimizer=tf.compat.v1.train.GradientDescentOptimizer(0.05))
  global_step = tf.compat.v1.train.get_global_step()
  variables = tf.compat.v1.global_variables()
  worker_device = '/job:%s/device:CPU:0' % cluster.worker_job_name
  on_worker = _initialized_on(variables, worker_device)
  on_ps = _initialized_on(variables, '/job:ps/task:0/device:CPU:0')

  manager = tf.compat.v1.train.SessionManager(
      ready_op=tf.compat.v1.report_uninitialized_variables(), recovery_wait_secs=0.5)
  session_config = cluster.session_config(allow_soft_placement=False)
  if cluster.is_chief:
    sess = manager.prepare_session(
        server.target, init_op=tf.compat.v1.global_variables_initializer(),
        config=session_config)
  else:
    sess = manager.wait_for_session(server.target, config=session_config,
                                    max_wait_secs=timeout)
  print('READY', cluster.task_type, cluster.task_index, flush=True)

  options = tf.compat.v1.RunOptions(output_partition_graphs=True)
  metadata = tf.compat.v1.RunMetadata()
  losses, steps_seen = [], []
  for step in range(steps):
    kwargs = {'options': options, 'run_metadata': metadata} if step == 0 else {}
    loss, gstep = sess.run([model.train_op, global_step], **kwargs)
    losses.append(float(loss))
    steps_seen.append(int(gstep))
    print('STEP', step, gstep, loss, flush=True)
  partition_nodes = [
      {'name': node.name, 'op': node.op, 'device': node.device}
      for graph in metadata.partition_graphs for node in graph.node
      if node.op in ('VarHandleOp', 'VariableV2', 'ResourceApplyGradientDescent')]

  total = cluster.num_worker_replicas * steps
  deadline = time.time() + timeout
  final_step = int(sess.run(global_step))
  while final_step < total and time.time() < deadline:
    time.sleep(0.2)
    final_step = int(sess.run(global_step))

  result = {
      'task': '%s:%d' % (cluster.task_type, cluster.task_index),
      'worker_job_name': cluster.worker_job_name,
      'variables': {v.op.name: {'device': v.device, 'op': v.op.type} for v in variables},
      'partition_nodes': partition_nodes,
      'initialized_on_worker': [bool(b) for b in sess.run(on_worker)],
      'initialized_on_ps': [bool(b) for b in sess.run(on_ps)],
      'losses': losses,
      'global_steps': steps_seen,
      'final_global_step': final_step,
  }
  print('RESULT ' + json.dumps(result), flush=True)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--steps', type=int, default=20)
  parser.add_argument('--timeout', type=float, default=90.0)
  args = parser.parse_args()
  tf.compat.v1.disable_eager_execution()
  cluster = cluster_lib.ClusterConfig.from_tf_config(require_ps=True)
  print('TASK', cluster, flush=True)
  if cluster.task_type == 'ps':
    server = cluster.start_server()
    print('READY ps', cluster.task_index, flush=True)
    server.join()
    return
  run_worker(cluster, args.steps, args.timeout)
  sys.stdout.flush()
  os._exit(0)  # a gRPC server can keep the interpreter alive at exit


if __name__ == '__main__':
  main()
