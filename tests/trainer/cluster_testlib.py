"""Tiny data, configs and checks for the `python -m trainer.train` cluster tests.

Every cluster test trains the smallest model the CLI builds (the `small_cnn`
slim classifier at 16x16) on a few generated TFRecords whose class is the
image's dominant colour, so a handful of steps lower the loss:

    data = cluster_testlib.write_colour_records(str(tmp_path / 'data'))
    config = cluster_testlib.write_pipeline_config(str(tmp_path), data, num_steps=20,
                                                   sync_replicas=True)
    cluster = cluster_util.local_cluster(num_workers=2, num_ps=1)
    with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
      tasks = cluster_testlib.start_tasks(group, cluster, config, train_dir)
      ...
    cluster_testlib.checkpoint_steps(train_dir)   # -> [..., 20]

Tasks run with small timeouts (deploy_config) so failures show up in seconds.
"""

import os
import re
import time

import numpy as np
import tensorflow as tf

from tests import cluster_util
from tests.trainer import paced_train_main
from tools import dataset_util

MODULE = 'trainer.train'
# The same program, its steps paced: for jobs that train until the test stops them.
PACED_MODULE = paced_train_main.__name__
# 5 steps a second per task at most: a small part of the CPU of a flat-out
# small_cnn task, and still 10-20 steps a second for a job to wait for.
PACE_SECS = 0.2
IMAGE_SIZE = 16
NUM_CLASSES = 2
_COLOURS = np.array([[220, 40, 40], [40, 40, 220]])

# One progress line of trainer.training_loop.
PROGRESS_RE = r'global step (\d+), loss = ([0-9.naif]+)'

# What a task logs when it ends a session (or the whole process fails) and starts over;
# a test that says "no task restarted" looks for every one of them (`restart_lines`).
# benchmarks/elastic_timeline.RESTART_MARKS looks for the same restarts in its runs.
RESTART_MARKS = (
    # An exception that reached the log, whatever caught it.
    'Traceback',
    # trainer/train.py: the legacy trainer after a lost peer, before its next session.
    'starting a new session on the training graph',
    # trainer/supervised_loop.py and tf_slim's learning.train: the Supervisor's session
    # ended by an AbortedError (a restarted server); its only line before the next one.
    'Retrying training!',
    # deployment/fault_tolerance.py: a lost ps met by a new session and a restore.
    'rebuilding the session',
    'recovered from a lost peer',
)
RESTART_RE = re.compile('|'.join(re.escape(mark) for mark in RESTART_MARKS))


def write_colour_records(data_dir, num_examples=32, seed=0, label_noise=0.0):
  """Writes classification TFRecords: label 1 = reddish, label 2 = bluish.

  Args:
    data_dir: output directory (created).
    num_examples: examples in the single shard.
    seed: numpy seed for the noise.
    label_noise: probability that an example gets the other label (drawn from
      a generator of its own, seeded seed + 1, so the images do not change).

  Returns:
    dict with `pattern` (the file glob) and `label_map_path`.
  """
  os.makedirs(data_dir, exist_ok=True)
  rng = np.random.default_rng(seed)
  flips = np.random.default_rng(seed + 1).random(num_examples) < label_noise
  codec = dataset_util.ImageCodec()
  path = os.path.join(data_dir, 'train.tfrecord-00000-of-00001')
  with tf.io.TFRecordWriter(path) as writer:
    for i in range(num_examples):
      label = i % NUM_CLASSES
      noise = rng.integers(-30, 30, size=(IMAGE_SIZE, IMAGE_SIZE, 3))
      image = np.clip(_COLOURS[label] + noise, 0, 255).astype(np.uint8)
      example = dataset_util.classification_example(
          codec.encode(image, 'png'), b'png', IMAGE_SIZE, IMAGE_SIZE,
          NUM_CLASSES - label if flips[i] else label + 1,
          source_id=str(i).encode())
      writer.write(example.SerializeToString())
  label_map_path = os.path.join(data_dir, 'label_map.pbtxt')
  with open(label_map_path, 'w') as f:
    for index, name in enumerate(('red', 'blue'), start=1):
      f.write("item { id: %d name: '%s' }\n" % (index, name))
  return {'pattern': os.path.join(data_dir, 'train.tfrecord-*'),
          'label_map_path': label_map_path}


def write_pipeline_config(directory, data, num_steps=20, batch_size=4, learning_rate=0.05,
                          sync_replicas=False, replicas_to_aggregate=1, num_clones=1,
                          save_interval_secs=600, log_every_n_steps=1,
                          startup_timeout_secs=60, chief_timeout_secs=60, name='pipeline.config',
                          debug_nan_loss_at_step=0, termination_grace_secs=25,
                          replica_timeout_secs=300, recovery_timeout_secs=300,
                          snapshot_interval_secs=None, net='small_cnn', image_size=IMAGE_SIZE):
  """Writes a pipeline config for the tiny classifier; returns its path.

  `snapshot_interval_secs` None leaves the field out (its default applies). `net`
  and `image_size` choose another slim classifier (benchmarks use bigger ones).
  """
  text = """
model { slim_classifier {
  num_classes: %(num_classes)d net: "%(net)s" image_height: %(size)d image_width: %(size)d
  dropout_keep_prob: 1.0 weight_decay: 0.0 } }
train_config {
  batch_size: %(batch_size)d
  num_steps: %(num_steps)d
  sync_replicas: %(sync)s
  replicas_to_aggregate: %(replicas)d
  optimizer { sgd_optimizer { learning_rate { constant_learning_rate {
      learning_rate: %(lr)g } } } }
  startup_delay_steps: 0
  batch_queue_capacity: 8
  num_batch_queue_threads: 1
  prefetch_queue_capacity: 2
  log_every_n_steps: %(log_every)d
  save_interval_secs: %(save_secs)d
  save_summaries_secs: 600
  debug_nan_loss_at_step: %(nan_step)d
}
train_input_reader {
  label_map_path: "%(label_map)s"
  decoder_type: CLASSIFICATION
  num_readers: 1
  tf_record_input_reader { input_path: "%(pattern)s" }
}
deploy_config {
  num_clones: %(num_clones)d
  clone_on_cpu: true
  startup_timeout_secs: %(startup)d
  chief_timeout_secs: %(chief)d
  termination_grace_secs: %(grace)d
  replica_timeout_secs: %(replica_timeout)d
  recovery_timeout_secs: %(recovery)d
  %(snapshot)s
}
""" % dict(num_classes=NUM_CLASSES, net=net, size=image_size, batch_size=batch_size,
           num_steps=num_steps, sync='true' if sync_replicas else 'false',
           replicas=replicas_to_aggregate, lr=learning_rate, log_every=log_every_n_steps,
           save_secs=save_interval_secs, label_map=data['label_map_path'],
           pattern=data['pattern'], num_clones=num_clones, startup=startup_timeout_secs,
           chief=chief_timeout_secs, nan_step=debug_nan_loss_at_step,
           grace=termination_grace_secs, replica_timeout=replica_timeout_secs,
           recovery=recovery_timeout_secs,
           snapshot='' if snapshot_interval_secs is None else
           'snapshot_interval_secs: %g' % snapshot_interval_secs)
  path = os.path.join(directory, name)
  with open(path, 'w') as f:
    f.write(text)
  return path


def train_args(config_path, train_dir, *extra):
  """Command-line arguments of `python -m trainer.train`."""
  return ['--pipeline_config_path=%s' % config_path, '--train_dir=%s' % train_dir,
          '--alsologtostderr'] + list(extra)


def _module_and_env(pace_secs):
  """The module a task runs and its extra environment: paced or not."""
  if not pace_secs:
    return MODULE, None
  return PACED_MODULE, {paced_train_main.PACE_ENV: repr(float(pace_secs))}


def start_task(group, cluster, job, index, config_path, train_dir, extra=(), name=None,
               pace_secs=None):
  """Starts one task of `cluster` running `python -m trainer.train`.

  `pace_secs` (e.g. `PACE_SECS`): each training step takes at least that long
  (tests/trainer/paced_train_main.py), for a job that trains until told to stop.
  """
  module, env = _module_and_env(pace_secs)
  return group.start(name or '%s%d' % (job, index),
                     cluster_util.tf_config(cluster, job, index), module=module,
                     args=train_args(config_path, train_dir, *extra), env=env)


def start_tasks(group, cluster, config_path, train_dir, skip=(), pace_secs=None):
  """Starts every task of `cluster`; returns {name: TaskProcess} (`pace_secs`: start_task)."""
  module, env = _module_and_env(pace_secs)
  return group.start_cluster(cluster, module, args=train_args(config_path, train_dir),
                             skip=skip, env=env)


def checkpoint_steps(train_dir):
  """Global steps of the checkpoints in `train_dir` that have an index file, sorted."""
  if not os.path.isdir(train_dir):
    return []
  steps = set()
  for name in os.listdir(train_dir):
    match = re.match(r'model\.ckpt-(\d+)\.index$', name)
    if match:
      steps.add(int(match.group(1)))
  return sorted(steps)


def latest_checkpoint_step(train_dir):
  """Global step stored in the checkpoint the state file points at (None if none)."""
  path = tf.train.latest_checkpoint(train_dir)
  if path is None:
    return None
  return int(tf.train.load_variable(path, 'global_step'))


def progress(process):
  """[(global_step, loss)] of every progress line the process logged."""
  return [(int(s), float(l)) for s, l in re.findall(PROGRESS_RE, process.output())]


def restart_lines(output):
  """The lines of a task's `output` that show a restart (RESTART_MARKS); [] if none."""
  return [line for line in output.splitlines() if RESTART_RE.search(line)]


def seconds_between(process, first, second):
  """Seconds between the first log lines of `process` containing `first` and then `second`."""
  times = {}
  for line in process.output().splitlines():
    for text in (first, second):
      match = re.match(r'[IWEF]\d{4} (\d\d):(\d\d):(\d\d\.\d+)', line)
      if text in line and text not in times and match:
        hours, minutes, seconds = match.groups()
        times[text] = int(hours) * 3600 + int(minutes) * 60 + float(seconds)
  if len(times) < 2:
    raise AssertionError('%s never logged both %r and %r\n%s' % (
        process.name, first, second, process.output()[-3000:]))
  return (times[second] - times[first]) % 86400


def wait_until(predicate, timeout, group, what, interval=0.3):
  """Polls `predicate()` until true; raises TimeoutError with the logs otherwise."""
  deadline = time.time() + timeout
  while True:
    value = predicate()
    if value:
      return value
    if time.time() > deadline:
      raise TimeoutError('%s did not happen within %ss\n%s' % (what, timeout, group.logs()))
    time.sleep(interval)


def wait_all(group, processes, timeout):
  """Waits for every process of `processes` ({name: TaskProcess}); returns {name: code}."""
  deadline = time.time() + timeout
  return {name: group.wait(process, timeout=max(deadline - time.time(), 1))
          for name, process in sorted(processes.items())}


def wait_all_timed(group, processes, since, timeout):
  """Waits for every process of `processes` ({name: TaskProcess}), timing each exit.

  Polls every 0.1 s, so each exit is timed to about 0.1 s however the
  processes are ordered (waiting for them one after another would time a
  process that exited early by the one waited for before it).

  Args:
    group: the `ProcessGroup` (its logs go into the timeout error).
    processes: {name: TaskProcess}.
    since: the `time.time()` the exits are timed from (e.g. the fault's).
    timeout: seconds from `since` before giving up with TimeoutError.

  Returns:
    ({name: exit code}, {name: seconds from `since` to its exit}).
  """
  codes, seconds = {}, {}
  while True:
    for name, process in processes.items():
      if name not in codes and process.poll() is not None:
        codes[name], seconds[name] = process.poll(), time.time() - since
    if len(codes) == len(processes):
      return codes, seconds
    if time.time() - since > timeout:
      raise TimeoutError('%s still running %ss after the fault\n%s' % (
          sorted(set(processes) - set(codes)), timeout, group.logs()))
    time.sleep(0.1)


def wait_for_step(group, process, step, timeout):
  """Waits until `process` logged progress at global step >= `step`; returns that step."""
  def reached():
    if process.poll() is not None:
      raise RuntimeError('%s exited with %s before step %d\n%s' % (
          process.name, process.poll(), step, group.logs()))
    steps = [s for s, _ in progress(process)]
    return max(steps) if steps and max(steps) >= step else None
  return wait_until(reached, timeout, group, '%s reaching step %d' % (process.name, step))
