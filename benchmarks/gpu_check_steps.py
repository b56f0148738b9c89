r"""The training steps of the GPU check, one process each (benchmarks.gpu_check runs them).

Each step trains the demo's SSD (configs/ssd_shapes.config) on the synthetic
shapes data (tools/create_shapes_tf_record.py), as `trainer.demo` does, and
writes one JSON object to `--result_json`: `status` ('pass' or 'fail'),
`figures` (the numbers) and `notes` (what the figures mean and the criteria).

    python benchmarks/gpu_check_steps.py env --result_json=out/env.json
    python benchmarks/gpu_check_steps.py multi_clone --result_json=out/3.json
    python benchmarks/gpu_check_steps.py mixed_precision --result_json=out/4.json
    python benchmarks/gpu_check_steps.py input_pipeline --result_json=out/5.json
    # the same on a CPU: tiny sizes, virtual CPU devices instead of logical GPUs
    python benchmarks/gpu_check_steps.py multi_clone --dry_run --result_json=/tmp/3.json

(run from the repository root with it on PYTHONPATH, as the check does; run
as a script, not with -m, so that the env step works without TensorFlow).

The steps:

* env: what TensorFlow was built with, which GPUs it sees and the GPU
  `nvidia-smi` names; a first matmul (cuBLAS) and convolution (cuDNN) on GPU
  0, timed (the CUDA libraries load and the kernels compile there), so a
  machine whose TensorFlow cannot use its GPU fails here in seconds.
* multi_clone: 2 clones on 2 logical GPUs carved from GPU 0 (2 virtual CPU
  devices with --dry_run), `trainer.train` for 200 steps, once with
  `variable_update='parameter_server'` (slim's default) and once with
  `'replicated'` (per-clone copies, gradients all-reduced); passes when every
  logged loss is finite and the mean of the last 20 is below the first 20's.
* mixed_precision: the trainer's graph (`trainer.build_training_graph`, one
  clone) run by a plain Session loop with full visibility, once in fp32 and
  once with `use_mixed_precision`, whose model's gradients are made inf at one
  step while its loss stays finite. Passes when that step is skipped by the
  dynamic loss scale (variables unchanged, loss scale lowered) and the mean of
  the last 20 losses is within MIXED_TOLERANCE of fp32's, whose run takes that
  step's batch without an update too (the same updates in both).
* input_pipeline: the trainer's graph at batch 128 on one GPU, alternating in
  one session (a) training steps fed by the BatchQueue, (b) the same steps fed
  one saved batch (compute only) and (c) the queue's dequeue alone. The GPU
  waits for input for about 1 - time(b)/time(a) of a step; with `nvidia-smi`
  the GPU's idle fraction during (a) is sampled too. The queue keeps up when
  (a) reaches KEEPS_UP_FRACTION of (b).

Differs on purpose from the demo: fixed sizes per step, and no evaluation or
export (those run in `make demo` and its tests).
"""

import argparse
import contextlib
import copy
import faulthandler
import functools
import json
import logging
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

MIXED_TOLERANCE = 0.10  # |mean last losses mixed - fp32| / fp32
KEEPS_UP_FRACTION = 0.95  # queue-fed steps/sec over compute-only steps/sec
STEP_SIZES = {
    # step: {'gpu': sizes on the GPU machine, 'dry': sizes of --dry_run}
    'multi_clone': {'gpu': dict(steps=200, batch=16, images=512, window=20),
                    'dry': dict(steps=16, batch=4, images=32, window=4)},
    # inject_at: the run (1-based) whose gradients are made inf.
    'mixed_precision': {'gpu': dict(steps=150, batch=32, images=512, window=20, inject_at=50),
                        'dry': dict(steps=16, batch=4, images=32, window=4, inject_at=6)},
    'input_pipeline': {'gpu': dict(batch=128, images=1024, warmup=10, steps=20, repeats=3),
                       'dry': dict(batch=8, images=32, warmup=2, steps=3, repeats=2)},
}
LOGICAL_GPU_MB = 16000


def _tf():
  """Imports TensorFlow late, so `--help` and the env step's errors stay cheap."""
  import tensorflow as tf  # noqa: PLC0415
  return tf


def devices_and_config(dry_run, num_devices, memory_mb=LOGICAL_GPU_MB):
  """Clone devices and a session config: logical GPUs of GPU 0, or virtual CPUs.

  Must run before anything in the process initialises the GPU.

  Returns:
    (['/device:GPU:0', ...] or ['/device:CPU:0', ...], ConfigProto).

  Raises:
    RuntimeError: without --dry_run, when TensorFlow sees no GPU.
  """
  tf = _tf()
  if dry_run:
    return (['/device:CPU:%d' % i for i in range(num_devices)],
            tf.compat.v1.ConfigProto(device_count={'CPU': num_devices},
                                     allow_soft_placement=True))
  gpus = tf.config.list_physical_devices('GPU')
  if not gpus:
    raise RuntimeError('TensorFlow sees no GPU (tf.config.list_physical_devices("GPU") is '
                       'empty); install its CUDA build, or pass --dry_run on a CPU')
  tf.config.set_logical_device_configuration(
      gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=memory_mb)] * num_devices)
  # Graph-mode sessions take their devices from the ConfigProto, so the split
  # is spelled out there too (as tests/deployment/gpu_equivalence_main.py does).
  config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
  config.gpu_options.experimental.virtual_devices.add(memory_limit_mb=[memory_mb] * num_devices)
  return ['/device:GPU:%d' % i for i in range(num_devices)], config


def shapes_configs(work_dir, num_images, num_steps, batch_size):
  """Writes the shapes data and returns the demo's configs pointed at it."""
  from core import config_util  # noqa: PLC0415
  from tools import create_shapes_tf_record  # noqa: PLC0415
  from trainer import demo  # noqa: PLC0415
  config_path = demo._DEFAULT_CONFIG  # noqa: SLF001  (the demo's own config)
  resizer = config_util.load_pipeline_config(config_path).model.ssd.image_resizer
  data = create_shapes_tf_record.create_shapes_dataset(
      os.path.join(work_dir, 'data'), num_train=num_images, num_val=4, seed=0,
      height=resizer.fixed_shape_resizer.height, width=resizer.fixed_shape_resizer.width)
  configs = demo.prepare_configs(config_path, data, num_steps)
  configs['train_config'].batch_size = batch_size
  return configs


@contextlib.contextmanager
def captured_progress():
  """Collects the trainer's progress lines (INFO on slimtrain's logger) while the block runs."""
  from core import logs  # noqa: PLC0415
  lines = []

  class Collect(logging.Handler):
    def emit(self, record):
      lines.append(record.getMessage())
  handler = Collect()
  logs.logger().setLevel(logging.INFO)
  logs.logger().addHandler(handler)
  try:
    yield lines
  finally:
    logs.logger().removeHandler(handler)


def parse_progress(lines):
  """(losses, examples/sec) of `TrainStepRunner`'s progress lines, in order."""
  losses, rates = [], []
  for line in lines:
    if not line.startswith('global step ') or 'loss = ' not in line:
      continue
    losses.append(float(line.split('loss = ')[1].split(',')[0]))
    if 'examples/sec' in line:
      rates.append(float(line.split(' examples/sec')[0].rsplit(', ', 1)[1]))
  return losses, rates


def loss_summary(losses, window):
  """Finite and decreasing: the first and last `window` losses' means."""
  window = max(1, min(window, len(losses) // 2))
  first, last = losses[:window], losses[-window:]
  finite = bool(losses) and all(math.isfinite(v) for v in losses)
  return {'logged_steps': len(losses), 'window': window,
          'first_mean': statistics.fmean(first) if first else None,
          'last_mean': statistics.fmean(last) if last else None,
          'finite': finite,
          'decreasing': finite and len(losses) >= 2 and statistics.fmean(last) <
          statistics.fmean(first)}


def run_multi_clone(dry_run, work_dir):
  """Step 3: 2 clones, parameter_server then replicated, through `trainer.train`."""
  tf = _tf()
  from builders import input_reader_builder  # noqa: PLC0415
  from builders import model_builder  # noqa: PLC0415
  from deployment import replicated  # noqa: PLC0415
  from trainer import trainer  # noqa: PLC0415
  sizes = STEP_SIZES['multi_clone']['dry' if dry_run else 'gpu']
  devices, session_config = devices_and_config(dry_run, 2)
  tf.compat.v1.disable_eager_execution()
  configs = shapes_configs(work_dir, sizes['images'], sizes['steps'], sizes['batch'])
  configs['train_config'].log_every_n_steps = 1
  figures, ok = {'devices': devices, 'steps': sizes['steps'], 'batch': sizes['batch']}, True
  for mode in ('parameter_server', 'replicated'):
    train_dir = os.path.join(work_dir, 'train_' + mode)
    started = time.perf_counter()
    with captured_progress() as lines:
      final_loss = trainer.train(
          functools.partial(input_reader_builder.build, configs['train_input_config']),
          functools.partial(model_builder.build, model_config=configs['model'],
                            is_training=True),
          configs['train_config'], master='', task=0, num_clones=2, worker_replicas=1,
          clone_on_cpu=dry_run, ps_tasks=0, worker_job_name='worker', is_chief=True,
          train_dir=train_dir, session_config_override=session_config,
          deployment_options={'clone_devices': devices, 'variable_update': mode})
    losses, rates = parse_progress(lines)
    summary = loss_summary(losses, sizes['window'])
    global_step = int(tf.train.load_checkpoint(train_dir).get_tensor('global_step'))
    summary.update(final_loss=float(final_loss), global_step=global_step,
                   seconds=time.perf_counter() - started,
                   examples_per_sec=statistics.median(rates[len(rates) // 2:]) if rates
                   else None,
                   losses=[round(v, 4) for v in losses])
    if mode == 'replicated':
      summary['all_reduce'] = replicated.choose_all_reduce(devices)
    figures[mode] = summary
    progress('multi_clone', '%s: global step %d, last loss %.3f' % (
        mode, global_step, summary['final_loss']), started)
    ok = ok and summary['finite'] and summary['decreasing'] and global_step == sizes['steps']
  return {'status': 'pass' if ok else 'fail', 'figures': figures,
          'notes': 'pass: in both modes every logged loss is finite, the mean of the last '
                   '%d losses is below the first %d, and the checkpoint is at step %d'
                   % (sizes['window'], sizes['window'], sizes['steps'])}


def _model_fn_with_inf_gradient(model_config, at_run):
  """create_model_fn whose losses get an inf gradient on run `at_run` (0: plain)."""
  from builders import model_builder  # noqa: PLC0415
  from core import numerics  # noqa: PLC0415

  def create_model():
    model = model_builder.build(model_config=model_config, is_training=True)
    if at_run > 0:
      plain_loss = model.loss
      model.loss = lambda *args, **kwargs: numerics.inject_inf_gradients(
          plain_loss(*args, **kwargs), at_run)
    return model
  return create_model


@contextlib.contextmanager
def running_queues(sess):
  """Starts the graph's queue runners; stops them (and closes `sess`) on exit."""
  tf = _tf()
  coord = tf.train.Coordinator()
  with sess.graph.as_default():  # Else TF warns that the default graph has no runners.
    threads = tf.compat.v1.train.start_queue_runners(sess=sess, coord=coord)
  try:
    yield
  finally:
    coord.request_stop()
    sess.close()
    coord.join(threads, stop_grace_period_secs=5, ignore_live_threads=True)


def _session(graph, train_config, session_config):
  """A session on `graph` with its variables and tables initialised (copies last)."""
  tf = _tf()
  from trainer import trainer  # noqa: PLC0415
  sess = tf.compat.v1.Session(graph=graph, config=trainer.session_config(
      train_config, base=session_config))
  with graph.as_default():
    sess.run(tf.compat.v1.global_variables_initializer())
    # Replicated copies start from copy 0's initialised value.
    sess.run([tf.compat.v1.local_variables_initializer(), tf.compat.v1.tables_initializer()])
  return sess


def build_graph(configs, devices, dry_run, mixed=False, inf_gradient_at=0, batch=None):
  """The trainer's graph with one clone on devices[0]; returns (TrainingGraph, config)."""
  tf = _tf()
  from builders import input_reader_builder  # noqa: PLC0415
  from trainer import trainer  # noqa: PLC0415
  train_config = copy.deepcopy(configs['train_config'])
  train_config.use_mixed_precision = mixed
  if batch:
    train_config.batch_size = batch
  read = functools.partial(input_reader_builder.build, configs['train_input_config'])

  def create_tensor_dict():
    tf.compat.v1.set_random_seed(1)  # The first op of the graph: same data in every run.
    return read()
  graph = trainer.build_training_graph(
      create_tensor_dict, _model_fn_with_inf_gradient(configs['model'], inf_gradient_at),
      train_config, task=0, num_clones=1, worker_replicas=1, clone_on_cpu=dry_run,
      ps_tasks=0, worker_job_name='worker', deployment_options={'clone_devices': devices[:1]})
  return graph, train_config


def _train_recording(configs, devices, session_config, dry_run, steps, mixed, inf_at,
                     skip_at=0):
  """Runs the trainer's graph for `steps` steps; records what each step did.

  Run `skip_at` (1-based; 0: none) only takes its batch from the queue, as a
  step skipped by the dynamic loss scale does, and records loss None.
  """
  tf = _tf()
  from trainer import trainer  # noqa: PLC0415
  started = time.perf_counter()
  label = 'mixed_precision %s' % ('mixed' if mixed else 'fp32')
  graph, train_config = build_graph(configs, devices, dry_run, mixed=mixed,
                                    inf_gradient_at=inf_at)
  progress(label, 'graph built', started)
  with trainer.mixed_precision_ends_with(train_config):
    with graph.graph.as_default():
      scales = [v for v in tf.compat.v1.global_variables()
                if v.op.name.endswith('current_loss_scale')]
      probe = tf.compat.v1.trainable_variables()[0]
      probe_sum = tf.reduce_sum(tf.abs(probe.read_value()))
    sess = _session(graph.graph, train_config, session_config)
    progress(label, 'session ready, variables initialised', started)
    # probe[i] and loss_scales[i] are read before run i (and after run i - 1).
    record = {'losses': [], 'global_steps': [], 'loss_scales': [], 'probe': []}

    def read_state():
      values = sess.run([probe_sum] + scales)
      record['probe'].append(float(values[0]))
      record['loss_scales'].extend(float(v) for v in values[1:])
    with running_queues(sess):
      step_fn = sess.make_callable([graph.train_tensor, graph.step_after_update])
      take_batch = sess.make_callable(_dequeue_ops(graph.graph))
      read_state()
      for run in range(1, steps + 1):
        if run == skip_at:
          take_batch()
          record['losses'].append(None)
          record['global_steps'].append(record['global_steps'][-1] if run > 1 else 0)
        else:
          loss, global_step = step_fn()
          record['losses'].append(float(loss))
          record['global_steps'].append(int(global_step))
        read_state()
        if run in (1, 2) or run % 50 == 0:
          progress(label, 'run %d done' % run, started)
    return record


def run_mixed_precision(dry_run, work_dir):
  """Step 4: fp32 vs mixed precision with an inf-gradient step, same data."""
  tf = _tf()
  sizes = STEP_SIZES['mixed_precision']['dry' if dry_run else 'gpu']
  devices, session_config = devices_and_config(dry_run, 1)
  tf.compat.v1.disable_eager_execution()
  configs = shapes_configs(work_dir, sizes['images'], sizes['steps'], sizes['batch'])
  # One reader, no shuffle, one batching thread: both runs see the same batches.
  configs['train_input_config'].shuffle = False
  configs['train_input_config'].num_readers = 1
  configs['train_config'].num_batch_queue_threads = 1
  inject = sizes['inject_at']
  # fp32 leaves out the update of the run whose gradients mixed precision gets as inf
  # (and skips): both then take the same updates, and what differs is the precision
  # alone, not one update less (which moved the tiny dry run's last losses by 10 %).
  fp32 = _train_recording(configs, devices, session_config, dry_run, sizes['steps'],
                          mixed=False, inf_at=0, skip_at=inject)
  mixed = _train_recording(configs, devices, session_config, dry_run, sizes['steps'],
                           mixed=True, inf_at=inject)
  step_index = inject - 1  # The poisoned run, 0-based; probe[i] is read before run i.
  before = mixed['global_steps'][step_index - 1]
  scales = mixed['loss_scales']
  skipped = {
      'injected_at_run': inject,
      'variables_unchanged': mixed['probe'][step_index + 1] == mixed['probe'][step_index],
      'loss_scale_before': scales[step_index] if scales else None,
      'loss_scale_after': scales[step_index + 1] if scales else None,
      'global_step_before': before,
      'global_step_after': mixed['global_steps'][step_index],
      'steps_with_unchanged_variables': sum(
          1 for a, b in zip(mixed['probe'], mixed['probe'][1:]) if a == b),
  }
  skipped['loss_scale_lowered'] = bool(scales) and scales[step_index + 1] < scales[step_index]
  window = sizes['window']
  fp32_last = statistics.fmean(fp32['losses'][-window:])
  mixed_last = statistics.fmean(mixed['losses'][-window:])
  relative = abs(mixed_last - fp32_last) / abs(fp32_last)
  finite = all(math.isfinite(v) for v in fp32['losses'] + mixed['losses'] if v is not None)
  ok = (finite and skipped['variables_unchanged'] and skipped['loss_scale_lowered'] and
        relative <= MIXED_TOLERANCE)
  figures = {
      'device': devices[0], 'steps': sizes['steps'], 'batch': sizes['batch'],
      'skipped_step': skipped, 'window': window, 'fp32_last_mean': fp32_last,
      'mixed_last_mean': mixed_last, 'relative_difference': relative,
      'tolerance': MIXED_TOLERANCE, 'finite': finite,
      'final_loss_scale': scales[-1] if scales else None,
      'fp32_losses': [None if v is None else round(v, 4) for v in fp32['losses']],
      'mixed_losses': [round(v, 4) for v in mixed['losses']]}
  return {'status': 'pass' if ok else 'fail', 'figures': figures,
          'notes': 'pass: run %d (gradients inf, loss finite) left the '
                   'variables unchanged and lowered the dynamic loss scale, all losses are '
                   'finite, and the mean of the last %d mixed-precision losses is within %.0f %% '
                   'of fp32\'s (same batches, same initial values, fp32 also without the update '
                   'of run %d). The trainer logs each such step (training_loop, '
                   '"mixed precision skipped this update").'
                   % (inject, window, 100 * MIXED_TOLERANCE, inject)}


class GpuUtilisation:
  """Samples `nvidia-smi`'s GPU utilisation (%) in the background while active."""

  def __init__(self, period_ms=100):
    self.samples = []
    self._command = ['nvidia-smi', '--query-gpu=utilization.gpu', '--format=csv,noheader,nounits',
                     '-lms', str(period_ms), '-i', '0']
    self.available = shutil.which('nvidia-smi') is not None
    self._process = None
    self._reader = None

  def __enter__(self):
    if self.available:
      self._process = subprocess.Popen(self._command, stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL, text=True)
      self._reader = threading.Thread(target=self._read, daemon=True)
      self._reader.start()
    return self

  def _read(self):
    for line in self._process.stdout:
      if line.strip().isdigit():
        self.samples.append(int(line.strip()))

  def __exit__(self, *exc):
    if self._process is not None:
      self._process.terminate()
      self._process.wait(timeout=10)
      self._reader.join(timeout=10)


def _dequeue_ops(graph):
  """The queue dequeues that feed the model (not another queue's enqueue)."""
  dequeues = []
  for op in graph.get_operations():
    if not op.type.startswith('QueueDequeue'):
      continue
    consumers = [c for out in op.outputs for c in out.consumers()]
    if consumers and not any(c.type.startswith('QueueEnqueue') for c in consumers):
      dequeues.append(op)
  return dequeues


def run_input_pipeline(dry_run, work_dir):
  """Step 5: does the BatchQueue keep up with the GPU at batch 128?"""
  tf = _tf()
  sizes = STEP_SIZES['input_pipeline']['dry' if dry_run else 'gpu']
  devices, session_config = devices_and_config(dry_run, 1)
  tf.compat.v1.disable_eager_execution()
  threads = os.cpu_count() or 2
  started = time.perf_counter()
  configs = shapes_configs(work_dir, sizes['images'], 10 ** 6, sizes['batch'])
  configs['train_config'].num_batch_queue_threads = threads
  graph, train_config = build_graph(configs, devices, dry_run)
  dequeues = _dequeue_ops(graph.graph)
  if len(dequeues) != 1:
    raise RuntimeError('expected one dequeue feeding the clone, found %d' % len(dequeues))
  inputs = list(dequeues[0].outputs)
  batch, steps = sizes['batch'], sizes['steps']
  sess = _session(graph.graph, train_config, session_config)
  progress('input_pipeline', 'session ready, variables initialised', started)
  rates = {'queue_fed': [], 'compute_only': [], 'dequeue_only': []}
  utilisation = []
  with running_queues(sess):
    train = sess.make_callable([graph.train_tensor])
    for run in range(1, sizes['warmup'] + 1):
      train()
      if run in (1, 2):
        progress('input_pipeline', 'warm-up step %d done' % run, started)
    saved = sess.run(inputs)
    fed = sess.make_callable([graph.train_tensor], feed_list=inputs)
    dequeue = sess.make_callable(inputs)
    for _ in range(sizes['warmup'] // 2 + 1):
      fed(*saved)
    for _ in range(sizes['repeats']):
      # The dequeue alone drains the queues, the compute-only segment gives them
      # as long to refill as training would, then the queue feeds training.
      rates['dequeue_only'].append(_rate(dequeue, steps, batch))
      rates['compute_only'].append(_rate(lambda: fed(*saved), steps, batch))
      with GpuUtilisation() as sampler:
        rates['queue_fed'].append(_rate(train, steps, batch))
      utilisation.extend(sampler.samples)
      progress('input_pipeline', 'repeat done: %s' % {
          name: round(values[-1], 1) for name, values in rates.items()}, started)
  medians = {name: statistics.median(values) for name, values in rates.items()}
  keeps_up = medians['queue_fed'] >= KEEPS_UP_FRACTION * medians['compute_only']
  figures = {
      'device': devices[0], 'batch': batch, 'batch_queue_threads': threads,
      'steps_per_repeat': steps, 'repeats': sizes['repeats'],
      'examples_per_sec': rates, 'median_examples_per_sec': medians,
      'queue_fed_over_compute_only': medians['queue_fed'] / medians['compute_only'],
      'gpu_wait_fraction_from_step_times': max(
          0.0, 1.0 - medians['queue_fed'] / medians['compute_only']),
      'nvidia_smi_samples': len(utilisation),
      'gpu_idle_fraction_nvidia_smi': (1.0 - statistics.fmean(utilisation) / 100.0
                                       if utilisation else None),
      'keeps_up': keeps_up}
  # On a CPU the queue and the model share the cores, so only the GPU run judges.
  return {'status': 'pass' if keeps_up or dry_run else 'fail', 'figures': figures,
          'notes': 'queue_fed: training steps fed by the BatchQueue; compute_only: the same '
                   'steps fed one saved batch; dequeue_only: the queue alone (it starts with '
                   'whatever the queues hold, so it overstates the refill rate). pass (keeps '
                   'up): queue_fed >= %.2f x compute_only (--dry_run: measured at all)'
                   % KEEPS_UP_FRACTION}


def progress(step, what, started):
  """Prints one line of a step's progress, seconds since `started` first."""
  print('[%s %6.1f s] %s' % (step, time.perf_counter() - started, what), flush=True)


def _rate(run, steps, batch):
  start = time.perf_counter()
  for _ in range(steps):
    run()
  return steps * batch / (time.perf_counter() - start)


def run_env(dry_run, work_dir):
  """Step 0: the machine, TensorFlow's build and the GPUs it sees."""
  del work_dir
  figures = {'python': platform.python_version(), 'cpus': os.cpu_count()}
  if shutil.which('nvidia-smi'):
    result = subprocess.run(['nvidia-smi', '--query-gpu=name,memory.total,driver_version',
                             '--format=csv,noheader'], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=30, check=False)
    figures['nvidia_smi'] = result.stdout.strip()
  else:
    figures['nvidia_smi'] = None
  try:
    tf = _tf()
  except ImportError as e:
    figures['tensorflow'] = 'not importable: %s' % e
    return {'status': 'fail', 'figures': figures, 'notes': 'TensorFlow is not installed'}
  build = tf.sysconfig.get_build_info()
  gpus = [d.name for d in tf.config.list_physical_devices('GPU')]
  figures.update(tensorflow=tf.__version__, is_cuda_build=bool(build.get('is_cuda_build')),
                 cuda_version=build.get('cuda_version'), cudnn_version=build.get('cudnn_version'),
                 physical_gpus=gpus)
  ok = dry_run or bool(gpus)
  if gpus:
    details = tf.config.experimental.get_device_details(tf.config.list_physical_devices('GPU')[0])
    figures['gpu_details'] = {k: str(v) for k, v in details.items()}
    ok = _first_gpu_ops(tf, figures) and ok
  return {'status': 'pass' if ok else 'fail', 'figures': figures,
          'notes': 'pass: TensorFlow sees a GPU and ran a matmul (cuBLAS) and a convolution '
                   '(cuDNN) on it (--dry_run: TensorFlow imports)'}


def _first_gpu_ops(tf, figures):
  """Runs a matmul and a convolution on GPU 0; records their seconds or the error."""
  started = time.perf_counter()
  try:
    with tf.device('/device:GPU:0'):
      product = tf.linalg.matmul(tf.ones([256, 256]), tf.ones([256, 256]))
      conv = tf.nn.conv2d(tf.ones([8, 32, 32, 16]), tf.ones([3, 3, 16, 16]), 1, 'SAME')
      float(tf.reduce_sum(product)) + float(tf.reduce_sum(conv))
  except Exception as e:  # noqa: BLE001  (any failure here is the finding)
    figures['first_gpu_ops_error'] = '%s: %s' % (type(e).__name__, str(e)[:2000])
    return False
  figures['first_gpu_ops_s'] = time.perf_counter() - started
  return True


STEPS = {'env': run_env, 'multi_clone': run_multi_clone,
         'mixed_precision': run_mixed_precision, 'input_pipeline': run_input_pipeline}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('step', choices=sorted(STEPS))
  parser.add_argument('--result_json', required=True, help='Where the result goes.')
  parser.add_argument('--dry_run', '--dry-run', action='store_true',
                      help='Tiny sizes on virtual CPU devices.')
  parser.add_argument('--work_dir', help='Data and checkpoints (default: a temp dir).')
  parser.add_argument('--stacks_after_s', type=float, default=None,
                      help='Print every thread\'s stack to stderr after this many seconds '
                           '(the check passes its budget less a few seconds).')
  args = parser.parse_args(argv)
  if args.stacks_after_s:
    faulthandler.dump_traceback_later(args.stacks_after_s, exit=False)
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  if args.step != 'env':  # env must report a TensorFlow that fails to import.
    import core  # noqa: F401,PLC0415  (core.compat, before tf_slim is used)
  with tempfile.TemporaryDirectory() as tmp:
    started = time.perf_counter()
    result = STEPS[args.step](args.dry_run, args.work_dir or tmp)
    result['seconds_in_step'] = time.perf_counter() - started
  with open(args.result_json, 'w') as f:
    json.dump(result, f, indent=1)
  print('RESULT %s %s' % (args.step, result['status']), flush=True)
  return 0


if __name__ == '__main__':
  sys.exit(main())
