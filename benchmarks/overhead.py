r"""Per-step cost of the framework: trainer.train and Estimator vs a bare Session loop.

One process, one model, one input, one thread setting, five ways to train:

  (a) `trainer.trainer.train` — BatchQueue + model_deploy + slim.learning.train
      (Supervisor, summary and checkpoint threads, TrainStepRunner);
  (c) a hand-written `tf.compat.v1.Session` loop over the same BatchQueue input
      and the same model, loss and optimizer (one `run` of [loss, train op] per
      step, as tf_cnn_benchmarks fetches it);
  (g) (opt-in: `--variants=a_nocheck,c_graph,c`) the same bare loop over the
      graph `trainer.build_training_graph` builds for (a') (its loss and step
      read): (a')/(g) is the trainer's runtime, (g)/(c) its graph;
  (b) `estimator.Estimator.train` with a `model_fn` over a tf.data
      input (skipped, and reported missing, when the `estimator` package has no
      `Estimator`);
  (c') the same hand-written Session loop over the same tf.data input as (b)
      (the fair baseline for (b): the BatchQueue and tf.data inputs differ);
  (d) Keras 3 `model.fit` on the same architecture and tf.data input
      (jit_compile off, steps_per_execution 1: the same work per step).

The data are in-memory synthetic images (random pixels, random labels). (a)
and (b) are timed from inside their own loops (a step-end timestamp per step,
taken by a TrainStepRunner subclass and a SessionRunHook), so graph building,
session start and the final checkpoint are not counted, but the Supervisor's
threads, summaries and hooks are. (a) and (b) keep their default summary and
checkpoint intervals (what users pay); the bare loops write neither, so after
the table the benchmark prints how many summaries and checkpoints (a) and (b)
wrote inside their timed windows, per repeat. Ratios: (a)/(c) (goal >= 0.98),
(b)/(c') (goal >= 0.95), and (a)/(d); each is called met or missed only when
every repeat's ratio agrees (bench_util.verdict), else "not resolved".

    python -m benchmarks.overhead --quick          # about 30 s on 2 cores
    python -m benchmarks.overhead                  # small CNN + ResNet-50 (32x32)
    python -m benchmarks.overhead --models=small_cnn --steps=200 --repeats=5
    python -m benchmarks.overhead --models=resnet_v1_50 --variants=a,c   # trainer vs bare
    python -m benchmarks.overhead --models=small_cnn --profile   # where a gap comes from

`--profile` does not time: it runs every graph variant with full tracing
(`RunOptions.FULL_TRACE`) and prints, per step, how many graph nodes ran, the
summed kernel time, the op types one variant runs that its baseline does not,
and the kernel time of (a)'s numerics checks (loss and global gradient norm).
`benchmarks.overhead_paired` measures (a)/(c) with the two loops in
alternating bursts inside one run, for ratios a drifting machine cannot blur.
"""

import collections
import contextlib
import glob
import os
import sys
import tempfile
import time

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf

from benchmarks import bench_util
from core import standard_fields as fields

flags.DEFINE_bool('quick', False, 'Tiny sizes and few steps (a smoke run of ~30 s).')
flags.DEFINE_list('models', ['small_cnn', 'resnet_v1_50'],
                  'Nets to measure (keys of models.slim_classifier.NETS).')
flags.DEFINE_integer('image_size', 32, 'Height and width of the images.')
flags.DEFINE_integer('batch_size', 32, 'Images per step for small_cnn.')
flags.DEFINE_integer('resnet_batch_size', 8, 'Images per step for resnet nets.')
flags.DEFINE_integer('threads', 2, 'intra- and inter-op threads of every variant.')
flags.DEFINE_integer('warmup', 10, 'Untimed warm-up steps per repeat (>= 10).')
flags.DEFINE_integer('steps', 100, 'Timed steps per repeat (>= 100).')
flags.DEFINE_integer('repeats', 5, 'Repeats per variant (>= 5).')
flags.DEFINE_list('variants', ['a', 'c', 'b', 'c_data', 'd'],
                  'Variants to time: a, a_nocheck (a without the gradient-norm check), c, '
                  'c_graph (g: c over a_nocheck\'s graph), b, c_data (that is c\'), d; a ratio '
                  'is printed when both of its variants ran.')
flags.DEFINE_bool('profile', False, 'Trace --steps steps of (a), (c), (b), (c\') instead of '
                  'timing, and print what each step runs.')
FLAGS = flags.FLAGS

NUM_CLASSES = 10
NUM_IMAGES = 64
LEARNING_RATE = 0.01
MOMENTUM = 0.9
TRAINER_GOAL = 0.98
ESTIMATOR_GOAL = 0.95
# Nodes of (a)'s numerics checks: the loss's CheckNumerics and the global norm.
NUMERICS_SCOPE = 'check_gradient_norm/'
LABELS = {
    'a': '(a) trainer.train',
    'a_nocheck': "(a') trainer.train, check_gradient_norm off",
    'c': '(c) Session loop, BatchQueue',
    'c_graph': "(g) Session loop over (a')'s graph",
    'b': '(b) Estimator.train',
    'c_data': "(c') Session loop, tf.data",
    'd': '(d) Keras 3 model.fit',
}


class StepTracer(object):
  """Runs training steps with full tracing; keeps what each step ran."""

  def __init__(self):
    self.nodes, self.kernel_ms, self.wall_ms, self.numerics_ms = [], [], [], []
    self.op_types = collections.Counter()
    self.graph_ops = 0

  @staticmethod
  def run_options():
    return tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)

  def record(self, graph, run_metadata, wall_secs):
    """Adds one traced step (op types are kept from the latest step)."""
    stats = [node for device in run_metadata.step_stats.dev_stats
             for node in device.node_stats]
    self.graph_ops = len(graph.get_operations())
    self.nodes.append(len(stats))
    self.kernel_ms.append(sum(n.op_end_rel_micros - n.op_start_rel_micros
                              for n in stats) / 1e3)
    self.wall_ms.append(1e3 * wall_secs)
    # timeline_label reads 'node = OpType(inputs)'.
    types = [(n, n.timeline_label.split(' = ', 1)[1].split('(', 1)[0])
             for n in stats if ' = ' in n.timeline_label]
    self.op_types = collections.Counter(op_type for _, op_type in types)
    self.numerics_ms.append(sum(
        n.op_end_rel_micros - n.op_start_rel_micros for n, op_type in types
        if op_type == 'CheckNumerics' or NUMERICS_SCOPE in n.node_name) / 1e3)

  def run(self, sess, fetches):
    """sess.run(fetches) traced; returns its result."""
    metadata = tf.compat.v1.RunMetadata()
    start = time.perf_counter()
    result = sess.run(fetches, options=self.run_options(), run_metadata=metadata)
    self.record(sess.graph, metadata, time.perf_counter() - start)
    return result


class Spec(object):
  """What every variant trains: net, image size, batch, data, threads, steps."""

  def __init__(self, net, image_size, batch_size, threads, warmup, steps):
    self.net = net
    self.image_size = image_size
    self.batch_size = batch_size
    self.threads = threads
    self.warmup = warmup
    self.steps = steps
    self.images, self.labels = bench_util.synthetic_images(
        NUM_IMAGES, image_size, image_size, NUM_CLASSES)
    # {variant: [(summaries, checkpoints) written inside the timed window]}
    self.window_writes = collections.defaultdict(list)

  def session_config(self):
    return bench_util.session_config(self.threads, self.threads)

  def model(self):
    return bench_util.make_classifier(self.net, self.image_size, NUM_CLASSES)

  def dataset(self):
    """Batched (images, 0-based labels), repeated forever, prefetched."""
    data = tf.data.Dataset.from_tensor_slices((self.images, self.labels))
    return data.repeat().batch(self.batch_size, drop_remainder=True).prefetch(2)

  def tensor_dict(self):
    """One example for the BatchQueue (labels 1-based, as the trainer expects)."""
    data = tf.data.Dataset.from_tensor_slices((self.images, self.labels + 1)).repeat()
    image, label = tf.compat.v1.data.make_one_shot_iterator(data).get_next()
    return {fields.InputDataFields.image: image, fields.InputDataFields.label: label}


def writes_in_window(log_dir, start, end):
  """Counts what a trainer wrote to `log_dir` between two time.time() values.

  Args:
    log_dir: the train_dir / model_dir.
    start, end: the timed window (wall-clock seconds).

  Returns:
    (summary events, checkpoints) written inside the window; the steps/sec
    counters ('.../sec' tags) are not counted, they cost no graph work.
  """
  summaries = 0
  for path in glob.glob(os.path.join(log_dir, 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      tags = [value.tag for value in event.summary.value]
      if (start < event.wall_time <= end and tags
          and not all(tag.endswith('/sec') for tag in tags)):
        summaries += 1
  checkpoints = sum(1 for path in glob.glob(os.path.join(log_dir, '*.index'))
                    if start < os.path.getmtime(path) <= end)
  return summaries, checkpoints


def train_config(spec, check_gradient_norm=True):
  from google.protobuf import text_format  # noqa: PLC0415
  from protos import train_pb2  # noqa: PLC0415
  config = text_format.Parse("""
      startup_delay_steps: 0
      optimizer { momentum_optimizer {
          learning_rate { constant_learning_rate { learning_rate: %g } }
          momentum_optimizer_value: %g } }
  """ % (LEARNING_RATE, MOMENTUM), train_pb2.TrainConfig())
  config.batch_size = spec.batch_size
  config.num_steps = spec.warmup + spec.steps
  config.num_batch_queue_threads = spec.threads
  config.check_gradient_norm = check_gradient_norm
  return config


def _train_op(model, images, labels):
  """Loss (with regularization) and one momentum step, as a user writes it."""
  global_step = tf.compat.v1.train.get_or_create_global_step()
  processed, shapes = model.preprocess(images)
  model.provide_groundtruth(labels)
  model.loss(model.predict(processed, shapes), shapes)
  total_loss = tf.compat.v1.losses.get_total_loss()
  optimizer = tf.compat.v1.train.MomentumOptimizer(LEARNING_RATE, MOMENTUM)
  with tf.control_dependencies(tf.compat.v1.get_collection(
      tf.compat.v1.GraphKeys.UPDATE_OPS)):
    train_op = optimizer.minimize(total_loss, global_step=global_step)
  return total_loss, train_op


def run_trainer(spec, tracer=None, check_gradient_norm=True, name='a'):
  """(a): trainer.train; images/sec from per-step timestamps (or traced steps).

  With check_gradient_norm=False it is (a'): the same without the global
  gradient-norm check, to price that check on its own.
  """
  stamps, wall_stamps = [], []

  def stamped_step(run_step, sess, train_op, global_step):
    if tracer is not None and len(stamps) >= spec.warmup:
      # The same fetches as TrainStepRunner's step, traced.
      loss, _ = tracer.run(sess, [train_op, global_step])
      stamps.append(time.perf_counter())
      return loss, len(stamps) >= spec.warmup + spec.steps
    result = run_step()
    stamps.append(time.perf_counter())
    wall_stamps.append(time.time())
    return result

  def count_window_writes(train_dir):
    if tracer is None:
      spec.window_writes[name].append(
          writes_in_window(train_dir, wall_stamps[spec.warmup], wall_stamps[-1]))

  train_with_step_wrapper(spec, stamped_step, check_gradient_norm, after=count_window_writes)
  return bench_util.rate_from_stamps(stamps, spec.warmup, spec.batch_size)


def train_with_step_wrapper(spec, wrap_step, check_gradient_norm=True, extra_steps=0,
                            after=None):
  """Runs trainer.train on `spec` (one clone, local) with every step wrapped.

  Args:
    spec: what to train; `spec.warmup + spec.steps + extra_steps` steps run.
    wrap_step: function(run_step, sess, train_op, global_step) returning what
      a step returns, (loss, should_stop); `run_step()` is the trainer's own
      step (TrainStepRunner's), which the wrapper times or replaces.
    check_gradient_norm: train_config.check_gradient_norm.
    extra_steps: steps beyond the warm-up and timed ones.
    after: function(train_dir) called once training ended, before the
      temporary train_dir is removed.
  """
  from trainer import trainer  # noqa: PLC0415
  from trainer import training_loop  # noqa: PLC0415
  base = training_loop.TrainStepRunner

  class WrappedRunner(base):
    def __call__(self, sess, train_op, global_step, train_step_kwargs):
      return wrap_step(
          lambda: base.__call__(self, sess, train_op, global_step, train_step_kwargs),
          sess, train_op, global_step)

  config = train_config(spec, check_gradient_norm)
  config.num_steps += extra_steps
  training_loop.TrainStepRunner = WrappedRunner
  try:
    with tempfile.TemporaryDirectory() as train_dir:
      trainer.train(spec.tensor_dict, spec.model, config, master='', task=0,
                    num_clones=1, worker_replicas=1, clone_on_cpu=True, ps_tasks=0,
                    worker_job_name='worker', is_chief=True, train_dir=train_dir,
                    session_config_override=spec.session_config())
      if after is not None:
        after(train_dir)
  finally:
    training_loop.TrainStepRunner = base


def _session_loop(spec, build_inputs, tracer=None):
  """Builds the train op over `build_inputs()` and times a bare Session loop."""
  return _time_bare_loop(spec, *bare_loop_graph(spec, build_inputs), tracer)


def bare_loop_graph(spec, build_inputs):
  """A graph with the train op over `build_inputs()`; returns (graph, step fetches)."""
  graph = tf.Graph()
  with graph.as_default():
    images, labels = build_inputs()
    # Like tf_cnn_benchmarks, the loop fetches the loss with the train op: every
    # trainer logs it and checks it for NaN, so it is part of a training step.
    step_fetches = _train_op(spec.model(), images, labels)
  return graph, step_fetches


@contextlib.contextmanager
def started_session(spec, graph):
  """A session over `graph`, initialised, with its queue runners running."""
  with graph.as_default():
    init = tf.group(tf.compat.v1.global_variables_initializer(),
                    tf.compat.v1.local_variables_initializer())
  with tf.compat.v1.Session(graph=graph, config=spec.session_config()) as sess:
    sess.run(init)
    coord = tf.train.Coordinator()
    threads = tf.compat.v1.train.start_queue_runners(sess=sess, coord=coord)
    try:
      yield sess
    finally:
      coord.request_stop()
      sess.close()
      coord.join(threads, stop_grace_period_secs=5, ignore_live_threads=True)


def _time_bare_loop(spec, graph, step_fetches, tracer=None):
  """Initialises `graph`, starts its queue runners and times `step_fetches` per step."""
  with started_session(spec, graph) as sess:
    if tracer is None:
      rate = bench_util.timed_steps(sess.make_callable(step_fetches), spec.warmup, spec.steps)
    else:
      for _ in range(spec.warmup):
        sess.run(step_fetches)
      for _ in range(spec.steps):
        tracer.run(sess, step_fetches)
      rate = 1e3 / bench_util.median(tracer.wall_ms)
  return rate * spec.batch_size


def run_session_trainer_graph(spec, tracer=None):
  """(g): the bare Session loop over the graph trainer.train builds (check off).

  Next to (a') it tells the trainer's graph from its runtime: (g) runs (a')'s
  step fetches without the Supervisor, its threads and TrainStepRunner.
  """
  from trainer import trainer  # noqa: PLC0415
  built = trainer.build_training_graph(
      spec.tensor_dict, spec.model, train_config(spec, check_gradient_norm=False), task=0,
      num_clones=1, worker_replicas=1, clone_on_cpu=True, ps_tasks=0,
      worker_job_name='worker')
  return _time_bare_loop(spec, built.graph, [built.train_tensor, built.step_after_update],
                         tracer)


def run_session_queue(spec, tracer=None):
  """(c): Session loop over the same BatchQueue the trainer builds."""
  return _session_loop(spec, lambda: batch_queue_inputs(spec), tracer)


def batch_queue_inputs(spec):
  """(c)'s input: images and 0-based labels from a BatchQueue like the trainer's."""
  from core import batcher  # noqa: PLC0415
  tensor_dict = spec.tensor_dict()
  tensor_dict[fields.InputDataFields.image] = tf.expand_dims(
      tensor_dict[fields.InputDataFields.image], 0)
  queue = batcher.BatchQueue(tensor_dict, batch_size=spec.batch_size,
                             batch_queue_capacity=150,
                             num_batch_queue_threads=spec.threads, prefetch_queue_capacity=5)
  examples = queue.dequeue()
  images = tf.concat([e[fields.InputDataFields.image] for e in examples], 0)
  labels = tf.stack([e[fields.InputDataFields.label] for e in examples]) - 1
  return images, labels


def run_session_dataset(spec, tracer=None):
  """(c'): Session loop over the tf.data input of (b) and (d)."""
  return _session_loop(
      spec, lambda: tf.compat.v1.data.make_one_shot_iterator(spec.dataset()).get_next(),
      tracer)


def estimator_module():
  """The `estimator` package when it provides Estimator, else None."""
  try:
    import estimator  # noqa: PLC0415
  except ImportError:
    return None
  return estimator if hasattr(estimator, 'Estimator') else None


def run_estimator(spec, tracer=None):
  """(b): Estimator.train over the tf.data input; timed by a SessionRunHook."""
  tfe = estimator_module()
  stamps, wall_stamps = [], []

  class StampHook(tf.compat.v1.train.SessionRunHook):
    def before_run(self, run_context):
      self._tracing = tracer is not None and len(stamps) >= spec.warmup
      self._start = time.perf_counter()
      if self._tracing:
        return tf.compat.v1.train.SessionRunArgs(None, options=tracer.run_options())
      return None

    def after_run(self, run_context, run_values):
      stamps.append(time.perf_counter())
      wall_stamps.append(time.time())
      if self._tracing:
        tracer.record(run_context.session.graph, run_values.run_metadata,
                      stamps[-1] - self._start)

  def model_fn(features, labels, mode):
    loss, train_op = _train_op(spec.model(), features, labels)
    return tfe.EstimatorSpec(mode, loss=loss, train_op=train_op)

  with tempfile.TemporaryDirectory() as model_dir:
    estimator = tfe.Estimator(model_fn, model_dir=model_dir,
                              config=tfe.RunConfig(session_config=spec.session_config()))
    estimator.train(spec.dataset, max_steps=spec.warmup + spec.steps, hooks=[StampHook()])
    if tracer is None:
      spec.window_writes['b'].append(
          writes_in_window(model_dir, wall_stamps[spec.warmup], wall_stamps[-1]))
  return bench_util.rate_from_stamps(stamps, spec.warmup, spec.batch_size)


def _keras_model(spec):
  """The same architecture in Keras 3 (small_cnn exactly; ResNet-50 v1 from applications)."""
  import keras  # noqa: PLC0415
  size = spec.image_size
  # slim's l2_regularizer(w) is w * sum(x^2) / 2; Keras' L2(w) is w * sum(x^2).
  l2 = keras.regularizers.L2(4e-5 / 2)
  head = [keras.Input((size, size, 3)), keras.layers.Resizing(size, size),
          keras.layers.Rescaling(2.0 / 255.0, offset=-1.0)]
  if spec.net == 'small_cnn':
    layers = []
    for depth in (32, 64, 128):
      layers += [keras.layers.Conv2D(depth, 3, padding='same', activation='relu',
                                     kernel_initializer='he_normal', kernel_regularizer=l2),
                 keras.layers.MaxPooling2D(2, padding='same')]
    layers += [keras.layers.GlobalAveragePooling2D(),
               keras.layers.Dense(NUM_CLASSES, kernel_regularizer=l2)]
    return keras.Sequential(head + layers)
  if spec.net == 'resnet_v1_50':
    inputs = head[0]
    net = head[2](head[1](inputs))
    body = keras.applications.ResNet50(weights=None, include_top=True, input_shape=(size, size, 3),
                                       classes=NUM_CLASSES, classifier_activation=None)
    return keras.Model(inputs, body(net))
  raise ValueError('no Keras version of net %r (use small_cnn or resnet_v1_50)' % spec.net)


def run_keras(spec):
  """(d): Keras 3 model.fit on the tf.data input; timed by a batch-end callback."""
  import keras  # noqa: PLC0415
  stamps = []

  class StampCallback(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
      stamps.append(time.perf_counter())

  model = _keras_model(spec)
  model.compile(optimizer=keras.optimizers.SGD(LEARNING_RATE, momentum=MOMENTUM),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                jit_compile=False, steps_per_execution=1)
  model.fit(spec.dataset(), epochs=1, steps_per_epoch=spec.warmup + spec.steps,
            callbacks=[StampCallback()], verbose=0)
  return bench_util.rate_from_stamps(stamps, spec.warmup, spec.batch_size)


def _print_window_writes(spec, results, out):
  """Says what (a) and (b) wrote inside their timed windows; the bare loops write nothing."""
  for name in ('a', 'a_nocheck', 'b'):
    if name in results:
      writes = spec.window_writes[name]
      print('inside the timed window %s wrote (summary events, checkpoints) per repeat: %s'
            % (LABELS[name], ' '.join('%d/%d' % w for w in writes)), file=out)
  print('(c), (c\'), (d) write no summaries or checkpoints; (a) and (b) keep their '
        'default intervals (what users pay).', file=out)


def run_benchmark(spec, repeats, selected=tuple(LABELS), out=sys.stdout):
  """Measures the selected variants for one Spec; prints the table and ratios.

  Args:
    spec: what to train.
    repeats: rates per variant (alternating).
    selected: variant keys to run (a subset of LABELS).
    out: where the tables go.

  Returns:
    dict {variant: [images/sec per repeat]} plus 'ratios': {name: value}.
  """
  have_estimator = estimator_module() is not None
  runners = {'a': run_trainer,
             'a_nocheck': lambda spec: run_trainer(spec, check_gradient_norm=False,
                                                   name='a_nocheck'),
             'c': run_session_queue, 'c_graph': run_session_trainer_graph,
             'b': run_estimator if have_estimator else None,
             'c_data': run_session_dataset, 'd': run_keras}
  variants = {name: (lambda run=run: run(spec)) if run is not None else None
              for name, run in runners.items() if name in selected}
  print('\n== %s %dx%d, batch %d, %d threads, %d warm-up + %d timed steps x %d repeats'
        % (spec.net, spec.image_size, spec.image_size, spec.batch_size, spec.threads,
           spec.warmup, spec.steps, repeats), file=out, flush=True)
  results = bench_util.repeat_variants(variants, repeats, out=out)
  bench_util.print_table('%s images/sec' % spec.net, results, 'img/s', LABELS, out=out)
  _print_window_writes(spec, results, out)
  ratios = {}
  for key, name, num, den, goal in (
      ('a/c', '(a)/(c)', 'a', 'c', TRAINER_GOAL),
      ('a_nocheck/c', "(a')/(c) [without the gradient-norm check]", 'a_nocheck', 'c', None),
      ('a/a_nocheck', "(a)/(a') [price of the gradient-norm check]", 'a', 'a_nocheck', None),
      ('a_nocheck/c_graph', "(a')/(g) [the trainer's runtime: Supervisor, threads, Python]",
       'a_nocheck', 'c_graph', None),
      ('c_graph/c', "(g)/(c) [the trainer's graph beyond the bare one]", 'c_graph', 'c', None),
      ('b/c_data', "(b)/(c')", 'b', 'c_data', ESTIMATOR_GOAL),
      ('a/d', '(a)/(d)', 'a', 'd', None),
      ('c/c_data', "(c)/(c') [BatchQueue vs tf.data input]", 'c', 'c_data', None)):
    if num in results and den in results:
      ratios[key] = bench_util.ratio(results[num], results[den])
      print(bench_util.ratio_line(name, results[num], results[den], goal=goal), file=out)
  if 'b' in selected and not have_estimator:
    print("ratio (b)/(c') = missing (estimator.Estimator is not available)", file=out)
  out.flush()
  results['ratios'] = ratios
  return results


def _type_difference(tracer, baseline):
  """'Type xN, ...': op types (with counts) a step of `tracer` ran beyond `baseline`."""
  extra = tracer.op_types - baseline.op_types
  return ', '.join('%s x%d' % item for item in sorted(extra.items())) or 'none'


def profile_benchmark(spec, out=sys.stdout):
  """Traces `spec.steps` steps of (a), (c), (b), (c') and prints what each step runs.

  Returns:
    dict {variant: StepTracer}.
  """
  runs = {'a': run_trainer, 'c': run_session_queue, 'c_data': run_session_dataset}
  if estimator_module() is not None:
    runs['b'] = run_estimator
  tracers = {}
  for name, run in runs.items():
    tracers[name] = StepTracer()
    run(spec, tracers[name])
  print('\n%s, %d traced steps per variant (after %d warm-up steps)'
        % (spec.net, spec.steps, spec.warmup), file=out)
  print('| variant | graph ops | nodes run / step | kernel ms / step | wall ms / step |',
        file=out)
  print('| --- | ---: | ---: | ---: | ---: |', file=out)
  median = bench_util.median
  for name in ('a', 'c', 'b', 'c_data'):
    if name in tracers:
      tracer = tracers[name]
      print('| %s | %d | %d | %.1f | %.1f |' % (
          LABELS[name], tracer.graph_ops, median(tracer.nodes), median(tracer.kernel_ms),
          median(tracer.wall_ms)), file=out)
  print('op types run per step by (a) beyond (c): %s'
        % _type_difference(tracers['a'], tracers['c']), file=out)
  step_ms = median(tracers['a'].kernel_ms)
  numerics_ms = median(tracers['a'].numerics_ms)
  print('(a) numerics checks (loss CheckNumerics + global gradient norm and its check): '
        '%.3f kernel ms / step = %.2f %% of (a)\'s kernel time' % (
            numerics_ms, 100.0 * numerics_ms / step_ms if step_ms else 0.0), file=out)
  if 'b' in tracers:
    print("op types run per step by (b) beyond (c'): %s"
          % _type_difference(tracers['b'], tracers['c_data']), file=out)
  out.flush()
  return tracers


def batch_size_for(net):
  """The batch size flag that applies to `net`; 8 in --quick mode."""
  if FLAGS.quick:
    return 8
  return FLAGS.resnet_batch_size if net.startswith('resnet') else FLAGS.batch_size


def main(argv):
  del argv
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  logging.set_verbosity(logging.WARNING)  # keeps the tables readable
  tf.get_logger().setLevel('ERROR')
  # Eager stays on in this process (Keras needs it); the graph variants build
  # their own tf.Graph. The eager thread pools get the same sizes.
  tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
  tf.config.threading.set_inter_op_parallelism_threads(FLAGS.threads)
  warmup, steps, repeats = FLAGS.warmup, FLAGS.steps, FLAGS.repeats
  models, image_size = FLAGS.models, FLAGS.image_size
  if FLAGS.quick:
    warmup, steps, repeats, models, image_size = 3, 30, 1, ['small_cnn'], 16
  elif not FLAGS.profile and (warmup < 10 or steps < 100 or repeats < 5):
    # The protocol binds timings; --profile only counts what a step runs.
    raise app.UsageError('full mode needs --warmup >= 10, --steps >= 100, --repeats >= 5')
  unknown = set(FLAGS.variants) - set(LABELS)
  if unknown:
    raise app.UsageError('--variants: unknown %s (choose from %s)'
                         % (sorted(unknown), sorted(LABELS)))
  for net in models:
    spec = Spec(net, image_size, batch_size_for(net), FLAGS.threads, warmup, steps)
    if FLAGS.profile:
      profile_benchmark(spec)
    else:
      run_benchmark(spec, repeats, selected=FLAGS.variants)


if __name__ == '__main__':
  app.run(main)
