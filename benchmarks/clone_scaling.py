r"""Clone scaling: images/sec of 1, 2 (4) clones, per variable_update mode vs `independent`.

Weak scaling at a fixed per-clone batch, as tf_cnn_benchmarks measures it. For
each clone count N the same model is built three ways in one process:

  parameter_server  `model_deploy` as slim does it: one copy of the variables
                    on the variables device, gradients summed there;
  replicated        `DeploymentConfig(variable_update='replicated')`: a copy
                    per clone, gradients all-reduced (add_n tree on CPU);
  independent       the control: N towers that never exchange anything (each
                    its own variables and optimizer on its own device) — the
                    ceiling any gradient exchange can reach.

Input is synthetic and device-resident (a non-trainable local variable per
clone, as tf_cnn_benchmarks' synthetic mode), so only compute and gradient
exchange are measured. Reported: scaling efficiency rate(N) / (N x rate(1))
and the ratio to the independent control (goal >= 0.90, resolved as in
`bench_util.verdict`).

What the ratio shows on virtual CPU devices: the clones share the same cores
and memory, so N clones are not N times faster even without any exchange (the
independent control slows down just as much). A ratio of ~1 says aggregation
adds no cost beyond the control there; it says nothing about scaling on real
devices. `--profile` measures the aggregation itself: with full tracing it
sums, per step, the kernel time of the cross-clone gradient sums (`*/sum_grads`
AddN), of cross-device transfers (_Send/_Recv; none are traced between virtual
CPU devices of one process, which share memory) and of the optimizer's apply
ops, and prints each as a fraction of the step's wall time.

On CPU, clone i runs on virtual device /device:CPU:i of a session with
`device_count={'CPU': N}`, one intra-op thread and N inter-op threads, so each
clone owns one core. On GPU (`--device=gpu`) the clones run on logical GPUs
carved from GPU 0.

    python -m benchmarks.clone_scaling --quick
    python -m benchmarks.clone_scaling --clones=1,2 --steps=100 --repeats=5
    python -m benchmarks.clone_scaling --profile --steps=50   # aggregation time per step
    python -m benchmarks.clone_scaling --device=gpu --net=resnet_v1_50 \
        --image_size=224 --batch_size=64 --clones=1,2,4
"""

import os
import statistics
import sys
import time

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf
import tf_slim as slim

from benchmarks import bench_util

FLAGS = flags.FLAGS

NUM_CLASSES = 10
MODES = ('parameter_server', 'replicated', 'independent')


def clone_devices(device, num_clones):
  """['/device:CPU:0', ...] or ['/device:GPU:0', ...] for num_clones clones."""
  kind = 'GPU' if device == 'gpu' else 'CPU'
  return ['/device:%s:%d' % (kind, i) for i in range(num_clones)]


def session_config(device, num_clones, max_clones, gpu_memory_mb):
  """One intra-op thread per clone on CPU; logical GPUs on GPU.

  The logical-GPU list is the same for every session of the process (GPUs can
  be split only once), sized for the largest clone count.
  """
  if device == 'cpu':
    return bench_util.session_config(1, num_clones, num_cpus=num_clones)
  # Summary ops (the classifiers' histograms) have no GPU kernel; the trainer
  # places them on the CPU the same way (trainer.session_config).
  config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
  config.gpu_options.experimental.virtual_devices.add(
      memory_limit_mb=[gpu_memory_mb] * max_clones)
  return config


def split_gpu(max_clones, gpu_memory_mb):
  """Carves GPU 0 into max_clones logical GPUs (before any session starts).

  Raises:
    RuntimeError: when there is no GPU.
  """
  gpus = tf.config.list_physical_devices('GPU')
  if not gpus:
    raise RuntimeError('--device=gpu but TensorFlow sees no GPU')
  tf.config.set_logical_device_configuration(
      gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=gpu_memory_mb)] * max_clones)


def _optimizer():
  return tf.compat.v1.train.MomentumOptimizer(0.01, 0.9)


def build_deployed(mode, devices, model_fn, batch_size, image_size, wrap_optimizer=None):
  """The model_deploy train op (parameter_server or replicated) over `devices`.

  `wrap_optimizer`, when given, is callable(optimizer) -> optimizer (e.g. the
  mixed-precision rewrite's loss-scaling wrapper).
  """
  from deployment import model_deploy  # noqa: PLC0415
  config = model_deploy.DeploymentConfig(num_clones=len(devices), clone_devices=devices,
                                         variable_update=mode)
  with tf.compat.v1.device(config.variables_device()):
    global_step = slim.create_global_step()
  clones = model_deploy.create_clones(config, bench_util.clone_loss,
                                      [model_fn, batch_size, image_size])
  update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS, clones[0].scope)
  optimizer = _optimizer()
  if wrap_optimizer is not None:
    optimizer = wrap_optimizer(optimizer)
  with tf.compat.v1.device(config.optimizer_device()):
    total_loss, grads_and_vars = model_deploy.optimize_clones(clones, optimizer)
    update_ops.append(model_deploy.apply_gradients(clones, optimizer, grads_and_vars,
                                                   global_step=global_step))
    with tf.control_dependencies([tf.group(*update_ops)]):
      return tf.identity(total_loss, name='train_op')


def build_independent(devices, model_fn, batch_size, image_size):
  """N towers, each with its own variables and optimizer on its own device."""
  train_ops = []
  for i, device in enumerate(devices):
    with tf.compat.v1.device(device), tf.compat.v1.variable_scope('tower_%d' % i) as scope:
      with tf.compat.v1.name_scope(scope.name + '/'):
        bench_util.clone_loss(model_fn, batch_size, image_size)
        losses = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.LOSSES, scope.name)
        regularization = tf.compat.v1.get_collection(
            tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES, scope.name)
        loss = tf.add_n(losses + regularization)
        var_list = tf.compat.v1.trainable_variables(scope.name)
        with tf.control_dependencies(tf.compat.v1.get_collection(
            tf.compat.v1.GraphKeys.UPDATE_OPS, scope.name)):
          train_ops.append(_optimizer().minimize(loss, var_list=var_list))
  return tf.group(*train_ops, name='train_op')


def measure(mode, devices, model_fn, batch_size, image_size, config, warmup, steps):
  """Builds one deployment in a fresh graph and returns its images/sec."""
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.set_random_seed(1)
    if mode == 'independent':
      train_op = build_independent(devices, model_fn, batch_size, image_size)
    else:
      train_op = build_deployed(mode, devices, model_fn, batch_size, image_size)
    global_init = tf.compat.v1.global_variables_initializer()
    local_init = tf.compat.v1.local_variables_initializer()
  with tf.compat.v1.Session(graph=graph, config=config) as sess:
    sess.run(global_init)
    sess.run(local_init)  # replicated copies start from copy 0's initial value
    rate = bench_util.timed_steps(sess.make_callable(train_op), warmup, steps)
  return rate * batch_size * len(devices)


def _aggregation_part(node_name, op_type):
  """Which part of the gradient exchange a traced node is, or None."""
  # Grappler may rename `<var>/sum_grads` to `<var>/ArithmeticOptimizer/..._sum_grads`.
  if node_name.rsplit('/', 1)[-1].endswith('sum_grads'):
    return 'sum'
  if op_type in ('_Send', '_Recv', '_HostSend', '_HostRecv'):
    return 'transfer'
  if 'Apply' in op_type or op_type == 'AssignAddVariableOp':
    return 'apply'
  return None


def trace_aggregation(mode, devices, model_fn, batch_size, image_size, config, warmup, steps):
  """Traced steps of one deployment: median per-step ms of wall, kernels and each part.

  Returns:
    dict with 'wall', 'kernels', 'sum', 'transfer', 'apply' (milliseconds per step).
  """
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.set_random_seed(1)
    if mode == 'independent':
      train_op = build_independent(devices, model_fn, batch_size, image_size)
    else:
      train_op = build_deployed(mode, devices, model_fn, batch_size, image_size)
    init = [tf.compat.v1.global_variables_initializer(),
            tf.compat.v1.local_variables_initializer()]
  options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
  per_step = {key: [] for key in ('wall', 'kernels', 'sum', 'transfer', 'apply')}
  with tf.compat.v1.Session(graph=graph, config=config) as sess:
    for op in init:
      sess.run(op)
    for _ in range(warmup):
      sess.run(train_op)
    for _ in range(steps):
      metadata = tf.compat.v1.RunMetadata()
      start = time.perf_counter()
      sess.run(train_op, options=options, run_metadata=metadata)
      per_step['wall'].append(1e3 * (time.perf_counter() - start))
      parts = {'kernels': 0.0, 'sum': 0.0, 'transfer': 0.0, 'apply': 0.0}
      for device_stats in metadata.step_stats.dev_stats:
        for node in device_stats.node_stats:
          micros = node.op_end_rel_micros - node.op_start_rel_micros
          label = node.timeline_label
          op_type = label.split(' = ', 1)[1].split('(', 1)[0] if ' = ' in label else ''
          parts['kernels'] += micros / 1e3
          part = _aggregation_part(node.node_name, op_type)
          if part:
            parts[part] += micros / 1e3
      for key, value in parts.items():
        per_step[key].append(value)
  return {key: statistics.median(values) for key, values in per_step.items()}


def profile_aggregation(device, clone_counts, modes, model_fn, batch_size, image_size,
                        warmup, steps, gpu_memory_mb=16000, out=sys.stdout):
  """Prints, per (mode, N), the aggregation's kernel time as a fraction of the step."""
  print('\naggregation time per step (full trace, median of %d steps; kernel ms, and %% of '
        'the step wall time)' % steps, file=out)
  print('| mode | clones | wall ms | kernel ms (all) | gradient sum ms | transfers ms | '
        'apply ms | sum + transfers % of wall | apply % of wall |', file=out)
  print('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |', file=out)
  results = {}
  for num_clones in clone_counts:
    devices = clone_devices(device, num_clones)
    config = session_config(device, num_clones, max(clone_counts), gpu_memory_mb)
    for mode in modes:
      r = results[(mode, num_clones)] = trace_aggregation(
          mode, devices, model_fn, batch_size, image_size, config, warmup, steps)
      print('| %s | %d | %.2f | %.2f | %.3f | %.3f | %.3f | %.1f | %.1f |' % (
          mode, num_clones, r['wall'], r['kernels'], r['sum'], r['transfer'], r['apply'],
          100 * (r['sum'] + r['transfer']) / r['wall'], 100 * r['apply'] / r['wall']),
          file=out, flush=True)
  return results


def run_benchmark(device, clone_counts, modes, model_fn, batch_size, image_size, warmup, steps,
                  repeats, gpu_memory_mb=16000, out=sys.stdout):
  """Measures every (mode, N); prints the table, efficiencies and ratios.

  Returns:
    dict {(mode, N): [images/sec per repeat]}.
  """
  max_clones = max(clone_counts)
  results = {}
  for num_clones in clone_counts:
    devices = clone_devices(device, num_clones)
    config = session_config(device, num_clones, max_clones, gpu_memory_mb)
    variants = {'%s x%d' % (mode, num_clones): (
        lambda mode=mode: measure(mode, devices, model_fn, batch_size, image_size, config,
                                  warmup, steps)) for mode in modes}
    for name, values in bench_util.repeat_variants(variants, repeats, out=out).items():
      mode, _ = name.split(' x')
      results[(mode, num_clones)] = values
  print('\nimages/sec, %d images per clone per step, %d warm-up + %d timed steps x %d repeats'
        % (batch_size, warmup, steps, repeats), file=out)
  print('| mode | clones | median img/s | min | max | spread % | scaling eff. | '
        'vs independent |', file=out)
  print('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |', file=out)
  for (mode, n), values in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    mid = bench_util.median(values)
    base = results.get((mode, 1))
    efficiency = mid / (n * bench_util.median(base)) if base else float('nan')
    control = results.get(('independent', n))
    vs_control = bench_util.ratio(values, control) if control else float('nan')
    print('| %s | %d | %.1f | %.1f | %.1f | %.0f | %.3f | %.3f |' % (
        mode, n, mid, min(values), max(values), 100 * (max(values) - min(values)) / mid,
        efficiency, vs_control), file=out)
  for mode in modes:
    if mode == 'independent':
      continue
    for n in clone_counts:
      if n > 1 and ('independent', n) in results:
        print(bench_util.ratio_line('%s x%d / independent x%d' % (mode, n, n),
                                    results[(mode, n)], results[('independent', n)],
                                    goal=0.90), file=out)
  print('On virtual CPU devices the clones share cores and memory: a ratio near 1 means the '
        'aggregation adds no cost beyond the independent control there, not that clones '
        'scale (see --profile for the aggregation\'s own time).', file=out)
  return results


def main(argv):
  del argv
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  logging.set_verbosity(logging.WARNING)
  tf.get_logger().setLevel('ERROR')
  warmup, steps, repeats = FLAGS.warmup, FLAGS.steps, FLAGS.repeats
  image_size, batch_size = FLAGS.image_size, FLAGS.batch_size
  clone_counts = [int(c) for c in (FLAGS.clones or (
      ['1', '2'] if FLAGS.device == 'cpu' else ['1', '2', '4']))]
  if FLAGS.quick:
    warmup, steps, repeats, image_size, batch_size = 3, 20, 1, 16, 8
  elif not FLAGS.profile and (warmup < 10 or steps < 100 or repeats < 5):
    # --profile counts time per traced step; the timing protocol binds the rates.
    raise app.UsageError('full mode needs --warmup >= 10, --steps >= 100, --repeats >= 5')
  unknown = set(FLAGS.modes) - set(MODES)
  if unknown:
    raise app.UsageError('--modes: unknown %s (choose from %s)' % (sorted(unknown), MODES))
  if FLAGS.device == 'gpu':
    split_gpu(max(clone_counts), FLAGS.gpu_memory_mb)
  tf.compat.v1.disable_eager_execution()

  def model_fn():
    return bench_util.make_classifier(FLAGS.net, image_size, NUM_CLASSES)
  if FLAGS.profile:
    profile_aggregation(FLAGS.device, clone_counts, FLAGS.modes, model_fn, batch_size,
                        image_size, warmup, steps, gpu_memory_mb=FLAGS.gpu_memory_mb)
    if not FLAGS.quick:
      return
  run_benchmark(FLAGS.device, clone_counts, FLAGS.modes, model_fn, batch_size, image_size,
                warmup, steps, repeats, gpu_memory_mb=FLAGS.gpu_memory_mb)


def define_flags():
  """Flags of the command line (not defined on import: gpu_throughput imports us)."""
  flags.DEFINE_bool('quick', False, 'Tiny sizes and few steps (a smoke run of ~30 s).')
  flags.DEFINE_enum('device', 'cpu', ['cpu', 'gpu'], 'Virtual CPU devices or logical GPUs.')
  flags.DEFINE_list('clones', None, 'Clone counts (default 1,2 on CPU; 1,2,4 on GPU).')
  flags.DEFINE_list('modes', ['parameter_server', 'replicated', 'independent'],
                    'Which deployments to measure.')
  flags.DEFINE_string('net', 'small_cnn', 'Net (a key of models.slim_classifier.NETS).')
  flags.DEFINE_integer('image_size', 32, 'Height and width of the synthetic images.')
  flags.DEFINE_integer('batch_size', 32, 'Images per clone per step.')
  flags.DEFINE_integer('gpu_memory_mb', 16000, 'Memory of each logical GPU (--device=gpu).')
  flags.DEFINE_integer('warmup', 10, 'Untimed warm-up steps per repeat (>= 10).')
  flags.DEFINE_integer('steps', 100, 'Timed steps per repeat (>= 100).')
  flags.DEFINE_integer('repeats', 5, 'Repeats per configuration (>= 5).')
  flags.DEFINE_bool('profile', False, 'Trace --steps steps of every (mode, clones) and print '
                    'the aggregation\'s kernel time per step instead of timing.')


if __name__ == '__main__':
  define_flags()
  app.run(main)
