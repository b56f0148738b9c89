"""A user's TF-Slim training script with `--sync_replicas`, as the tests run it.

Shaped like research/slim's `train_image_classifier.py` run on a cluster (the
TF 1 way: one gRPC server per task, the ps job only serves), written for these
tests. It imports TensorFlow and tf_slim only, nothing of slimtrain: whatever
makes it work on TF 2.21 must come from the installed package (the tf_slim
import hook applies core.compat). The cluster comes from TF_CONFIG; worker 0 is
the chief.

    TF_CONFIG='{"cluster": {...}, "task": {"type": "worker", "index": 0}}' \
        python slim_sync_train_script.py --train_dir=/tmp/t --max_number_of_steps=20

Each training task prints `TRAIN DONE <loss>` after `slim.learning.train`
returns, and the script then ends as the original does: by returning.
"""

import argparse
import json
import os

import numpy as np
import tensorflow as tf
import tf_slim as slim

tf1 = tf.compat.v1


def _parse_args():
  parser = argparse.ArgumentParser()
  parser.add_argument('--train_dir', required=True)
  parser.add_argument('--max_number_of_steps', type=int, default=20)
  parser.add_argument('--sync_replicas', type=int, default=1)
  parser.add_argument('--replicas_to_aggregate', type=int, default=0,
                      help='0: one gradient per worker replica')
  parser.add_argument('--batch_size', type=int, default=8)
  return parser.parse_args()


def _images_and_labels(batch_size, task_index):
  """A fixed batch of 8x8 'images' whose class is the brighter half."""
  rng = np.random.RandomState(task_index)
  labels = rng.randint(0, 2, size=batch_size)
  images = rng.uniform(0.0, 0.5, size=(batch_size, 8, 8, 1)).astype(np.float32)
  for i, label in enumerate(labels):
    images[i, :, 4 * label:4 * label + 4, :] += 0.5
  return tf.constant(images), tf.constant(labels.astype(np.int64))


def _network(images):
  with slim.arg_scope([slim.conv2d, slim.fully_connected],
                      weights_initializer=tf1.glorot_uniform_initializer(seed=1)):
    net = slim.conv2d(images, 4, [3, 3], scope='conv1')
    net = slim.max_pool2d(net, [2, 2], scope='pool1')
    net = slim.flatten(net)
    return slim.fully_connected(net, 2, activation_fn=None, scope='logits')


def main():
  args = _parse_args()
  tf1.disable_eager_execution()
  tf1.logging.set_verbosity(tf1.logging.INFO)  # slim's per-step 'global step N' lines
  config = json.loads(os.environ['TF_CONFIG'])
  cluster_spec = tf1.train.ClusterSpec(config['cluster'])
  job_name, task_index = config['task']['type'], int(config['task']['index'])
  server = tf1.train.Server(cluster_spec, job_name=job_name, task_index=task_index,
                            config=tf1.ConfigProto(intra_op_parallelism_threads=1,
                                                   inter_op_parallelism_threads=2))
  if job_name == 'ps':
    server.join()
    return

  worker_replicas = cluster_spec.num_tasks('worker')
  is_chief = task_index == 0
  with tf.Graph().as_default():
    with tf1.device(tf1.train.replica_device_setter(
        ps_tasks=cluster_spec.num_tasks('ps'),
        worker_device='/job:worker/task:%d' % task_index, cluster=cluster_spec)):
      global_step = tf1.train.get_or_create_global_step()
      images, labels = _images_and_labels(args.batch_size, task_index)
      logits = _network(images)
      tf1.losses.sparse_softmax_cross_entropy(labels, logits)
      total_loss = tf1.losses.get_total_loss()
      optimizer = tf1.train.GradientDescentOptimizer(0.5)
      if args.sync_replicas:
        optimizer = tf1.train.SyncReplicasOptimizer(
            optimizer, replicas_to_aggregate=args.replicas_to_aggregate or worker_replicas,
            total_num_replicas=worker_replicas)
      train_op = slim.learning.create_train_op(total_loss, optimizer, global_step=global_step)
    final_loss = slim.learning.train(
        train_op, logdir=args.train_dir, master=server.target, is_chief=is_chief,
        number_of_steps=args.max_number_of_steps, log_every_n_steps=1,
        save_summaries_secs=600, save_interval_secs=600,
        sync_optimizer=optimizer if args.sync_replicas else None)
  print('TRAIN DONE %s' % final_loss, flush=True)


if __name__ == '__main__':
  main()
