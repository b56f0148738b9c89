r"""ResNet-50 v1 training throughput on one GPU: slimtrain loop vs raw Session loop, clones.

Synthetic, device-resident data (tf_cnn_benchmarks' synthetic mode), the
tf_slim `resnet_v1_50` through `models.slim_classifier` and `model_deploy`
(one clone on /device:GPU:0). Two measurements:

1. Throughput per (variant, layout, batch): the same graph run by
     slimtrain  `slim.learning.train` with slimtrain's `TrainStepRunner`
                (Supervisor, summary and checkpoint threads), as
                `trainer.train` runs it;
     raw        a bare `Session.run(train_op)` loop;
   layouts: NHWC = the graph as built, grappler's layout optimizer off;
   NCHW = the same graph with the layout optimizer on, which rewrites the
   convolutions and batch norms to NCHW on the GPU (the tf_slim ResNet has no
   native NCHW build: its pooling and global pool are hard-wired to NHWC);
   variants (`--variants`): fp32; mixed = the trainer's `use_mixed_precision`
   (TF's mixed-precision graph rewrite with dynamic loss scaling, turned off
   again after each run: it is process-global); xla = the trainer's `use_xla`
   (XLA auto-clustering, `trainer.session_config`; on a CPU it also needs
   TF_XLA_FLAGS=--tf_xla_cpu_global_jit); mixed_xla = both. Besides
   slimtrain/raw per cell, the table gives each variant's raw speed-up over
   fp32.
   `--paired` measures both loops in one graph and one session per cell: the
   trainer's step function runs the bare loop between its own timed segments
   (t r | r t | t r ...), so a cell costs one graph build and one XLA compile
   instead of one per run, and each paired ratio compares segments measured
   back to back. `--time_budget_s` skips the cells that would no longer fit
   (each is estimated from the slowest cell of its kind so far) and the
   table says which; `--json_out` writes every rate to a file.
2. Clones on logical GPUs carved from GPU 0 (`benchmarks.clone_scaling` on
   `--device=gpu`): parameter_server and replicated vs the independent
   control.

    python -m benchmarks.gpu_throughput                      # on a GPU machine
    python -m benchmarks.gpu_throughput --batch_sizes=64 --layouts=NHWC
    python -m benchmarks.gpu_throughput --variants=fp32,mixed --clones=
    python -m benchmarks.gpu_throughput --quick              # CPU smoke: tiny, NHWC
    python -m benchmarks.gpu_throughput --paired --variants=fp32,mixed,xla,mixed_xla \
        --warmup=10 --steps=20 --repeats=5 --clones= --time_budget_s=200

Without a GPU only `--quick` (or `--allow_cpu`) runs: `--quick` trains the
backbones' small ResNet on 32x32 images on the CPU, to prove the script works;
its numbers say nothing about GPUs.
"""

import contextlib
import json
import os
import sys
import tempfile
import time

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf
import tf_slim as slim
from tensorflow.core.protobuf import rewriter_config_pb2

from benchmarks import bench_util
from benchmarks import clone_scaling

flags.DEFINE_bool('quick', False, 'CPU smoke run: tiny images, NHWC, few steps.')
flags.DEFINE_bool('allow_cpu', False, 'Run the full benchmark even without a GPU.')
flags.DEFINE_string('net', 'resnet_v1_50', 'Net (a key of models.slim_classifier.NETS).')
flags.DEFINE_integer('image_size', 224, 'Height and width of the synthetic images.')
flags.DEFINE_list('batch_sizes', ['64', '128', '256'], 'Batch sizes of the throughput table.')
flags.DEFINE_list('layouts', ['NHWC', 'NCHW'], 'Layouts of the throughput table.')
flags.DEFINE_list('variants', ['fp32', 'mixed', 'xla'],
                  'Variants of the throughput table: fp32, mixed (use_mixed_precision), '
                  'xla (use_xla), mixed_xla (both).')
flags.DEFINE_bool('paired', False, 'Alternate the trainer and the bare loop inside one '
                  'session per cell (one graph build and XLA compile per cell).')
flags.DEFINE_float('time_budget_s', 0, 'Skip the cells that would end past this many '
                   'seconds (0: run all).')
flags.DEFINE_string('json_out', None, 'Also write the rates of every cell to this JSON file.')
flags.DEFINE_list('clones', ['1', '2', '4'], 'Clone counts on logical GPUs (empty: skip).')
flags.DEFINE_integer('clone_batch_size', 64, 'Images per clone in the clone table.')
flags.DEFINE_integer('gpu_memory_mb', 18000, 'Memory of each logical GPU.')
flags.DEFINE_integer('warmup', 10, 'Untimed warm-up steps per repeat (>= 10).')
flags.DEFINE_integer('steps', 100, 'Timed steps per repeat (>= 100).')
flags.DEFINE_integer('repeats', 3, 'Repeats per variant (>= 3).')
FLAGS = flags.FLAGS

NUM_CLASSES = 1000
VARIANTS = ('fp32', 'mixed', 'xla', 'mixed_xla')
# Minimum warm-up, timed steps and repeats of a full (not --quick) run.
FULL_MINIMUM = {'warmup': 10, 'steps': 100, 'repeats': 3}
PAIRED_MINIMUM = {'warmup': 10, 'steps': 20, 'repeats': 5}
PAIRED_WARMUP_MIN_S = 5.0
# First guesses of a cell's seconds (graph, session, warm-up, 2 x repeats x
# steps), replaced by the slowest cell measured of the same kind.
FIRST_CELL_ESTIMATE_S = {'xla': 90.0, 'plain': 45.0}


def _train_config(variant):
  """The TrainConfig switches a variant stands for (what a user sets)."""
  from protos import train_pb2  # noqa: PLC0415
  return train_pb2.TrainConfig(use_mixed_precision=variant in ('mixed', 'mixed_xla'),
                               use_xla=variant in ('xla', 'mixed_xla'))


def _session_config(device, layout, variant, max_clones, gpu_memory_mb):
  """Session config of the throughput table; layout picks grappler's layout pass."""
  from trainer import trainer  # noqa: PLC0415
  config = clone_scaling.session_config(device, 1, max_clones, gpu_memory_mb)
  config.graph_options.rewrite_options.layout_optimizer = (
      rewriter_config_pb2.RewriterConfig.ON if layout == 'NCHW'
      else rewriter_config_pb2.RewriterConfig.OFF)
  return trainer.session_config(_train_config(variant), base=config)


@contextlib.contextmanager
def _built(device, batch_size, image_size, variant):
  """A fresh graph with the one-clone model_deploy train op: yields (graph, train_op).

  The mixed variant's rewrite is process-global: it is turned off on exit
  (`trainer.mixed_precision_ends_with`, as in `trainer.train`), so later
  graphs of this process run in fp32 again.
  """
  from trainer import trainer  # noqa: PLC0415

  def loss_scaled(optimizer):
    return tf.compat.v1.mixed_precision.enable_mixed_precision_graph_rewrite(
        optimizer, loss_scale='dynamic')
  graph = tf.Graph()
  with trainer.mixed_precision_ends_with(_train_config(variant)):
    with graph.as_default():
      tf.compat.v1.set_random_seed(1)

      def model_fn():
        return bench_util.make_classifier(FLAGS.net, image_size, NUM_CLASSES)
      mixed = _train_config(variant).use_mixed_precision
      train_op = clone_scaling.build_deployed(
          'parameter_server', clone_scaling.clone_devices(device, 1), model_fn, batch_size,
          image_size, wrap_optimizer=loss_scaled if mixed else None)
    yield graph, train_op


def raw_rate(device, layout, batch_size, image_size, warmup, steps, session_kwargs,
             variant='fp32'):
  """Images/sec of a bare Session loop."""
  with _built(device, batch_size, image_size, variant) as (graph, train_op):
    with graph.as_default():
      init = tf.group(tf.compat.v1.global_variables_initializer(),
                      tf.compat.v1.local_variables_initializer())
    config = _session_config(device, layout, variant, **session_kwargs)
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
      sess.run(init)
      return bench_util.timed_steps(sess.make_callable(train_op), warmup, steps) * batch_size


def slimtrain_rate(device, layout, batch_size, image_size, warmup, steps, session_kwargs,
                   variant='fp32'):
  """Images/sec of slim.learning.train + TrainStepRunner on the same graph."""
  from trainer import training_loop  # noqa: PLC0415
  stamps = []

  class StampedRunner(training_loop.TrainStepRunner):
    def __call__(self, *args):
      result = super().__call__(*args)
      stamps.append(time.perf_counter())
      return result

  with _built(device, batch_size, image_size, variant) as (graph, train_op), \
      graph.as_default(), tempfile.TemporaryDirectory() as train_dir:
    global_step = tf.compat.v1.train.get_global_step()
    with tf.control_dependencies([train_op]):
      step_after_update = tf.identity(global_step.read_value())
    runner = StampedRunner(number_of_steps=warmup + steps, examples_per_step=batch_size,
                           step_after_update=step_after_update)
    slim.learning.train(train_op, logdir=train_dir, train_step_fn=runner,
                        number_of_steps=warmup + steps,
                        session_config=_session_config(device, layout, variant,
                                                       **session_kwargs))
  return bench_util.rate_from_stamps(stamps, warmup, batch_size)


def paired_rates(device, layout, batch_size, image_size, warmup, steps, repeats,
                 session_kwargs, variant='fp32', out=sys.stdout):
  """Images/sec of the trainer and of the bare loop, alternating in one session.

  `slim.learning.train` with slimtrain's `TrainStepRunner` runs `warmup`
  untimed steps (and more until PAIRED_WARMUP_MIN_S have passed: the
  Supervisor writes a checkpoint and a summary as soon as training starts,
  which a real run amortises), then `repeats` timed segments of `steps` steps; at each
  segment boundary the step function runs a bare `Session.run(train_op)`
  segment of `steps` steps (after one untimed call) on the same session, before
  the trainer's segment on odd repeats and after it on even ones.

  Returns:
    {'slimtrain': [rate per repeat], 'raw': [rate per repeat]}.
  """
  from trainer import training_loop  # noqa: PLC0415
  rates = {'slimtrain': [], 'raw': []}
  # warm: the trainer's step count when the warm-up ended (None: still warming up).
  clock = {'trainer_steps': 0, 'segment_start': None, 'first_step': None, 'warm': None}

  def raw_segment(sess, train_op):
    rates['raw'].append(bench_util.timed_steps(sess.make_callable(train_op), 1, steps)
                        * batch_size)
    print('  repeat %d %-28s %10.1f' % (len(rates['raw']), 'raw', rates['raw'][-1]),
          file=out, flush=True)

  class AlternatingRunner(training_loop.TrainStepRunner):
    """Counts its own steps (the bare ones move the global step too) and stops itself."""

    def __call__(self, sess, train_op, global_step, train_step_kwargs):
      done, now = clock['trainer_steps'], time.perf_counter()
      clock['first_step'] = clock['first_step'] or now
      if clock['warm'] is None and done >= warmup and (
          now - clock['first_step'] >= PAIRED_WARMUP_MIN_S):
        clock['warm'] = done
      warm = clock['warm']
      if warm is not None and (done - warm) % steps == 0:
        segment = (done - warm) // steps
        if segment > 0:
          rates['slimtrain'].append(
              steps * batch_size / (time.perf_counter() - clock['segment_start']))
          print('  repeat %d %-28s %10.1f' % (segment, 'slimtrain', rates['slimtrain'][-1]),
                file=out, flush=True)
          if (segment - 1) % 2 == 0:
            raw_segment(sess, train_op)
        if segment == repeats:
          return self.last_loss, True
        if segment % 2 == 1:
          raw_segment(sess, train_op)
        clock['segment_start'] = time.perf_counter()
      result = super().__call__(sess, train_op, global_step, train_step_kwargs)
      clock['trainer_steps'] += 1
      return result

  with _built(device, batch_size, image_size, variant) as (graph, train_op), \
      graph.as_default(), tempfile.TemporaryDirectory() as train_dir:
    global_step = tf.compat.v1.train.get_global_step()
    with tf.control_dependencies([train_op]):
      step_after_update = tf.identity(global_step.read_value())
    runner = AlternatingRunner(number_of_steps=None, examples_per_step=batch_size,
                               log_every_n_steps=0, step_after_update=step_after_update)
    slim.learning.train(train_op, logdir=train_dir, train_step_fn=runner,
                        session_config=_session_config(device, layout, variant,
                                                       **session_kwargs))
  return rates


def _cells(variants, layouts, batch_sizes):
  """The table's cells, most telling first: every variant of the first layout and
  batch, then the next layout, then the next batch (so a time budget cuts the tail)."""
  return [(variant, layout, batch) for batch in batch_sizes for layout in layouts
          for variant in variants]


def run_throughput(device, layouts, batch_sizes, image_size, warmup, steps, repeats,
                   session_kwargs, variants=('fp32',), out=sys.stdout, paired=False,
                   time_budget_s=0):
  """The (variant, layout, batch) table: slimtrain vs raw.

  Returns:
    (tables, skipped): {cell: {'slimtrain': [...], 'raw': [...]}} and the cells
    left out by `time_budget_s`, each with its estimated seconds.
  """
  tables, skipped, started = {}, {}, time.perf_counter()
  slowest = dict(FIRST_CELL_ESTIMATE_S)
  for variant, layout, batch in _cells(variants, layouts, batch_sizes):
    kind = 'xla' if _train_config(variant).use_xla else 'plain'
    if time_budget_s and time.perf_counter() - started + slowest[kind] > time_budget_s:
      skipped[(variant, layout, batch)] = slowest[kind]
      continue
    kwargs = dict(batch_size=batch, image_size=image_size, warmup=warmup, steps=steps,
                  session_kwargs=session_kwargs, variant=variant)
    print('\n== %s %s %s %dx%d batch %d on %s' % (
        FLAGS.net, variant, layout, image_size, image_size, batch, device),
          file=out, flush=True)
    cell_start = time.perf_counter()
    if paired:
      tables[(variant, layout, batch)] = paired_rates(device, layout, repeats=repeats,
                                                      out=out, **kwargs)
    else:
      runs = {'slimtrain': lambda lay=layout, kw=kwargs: slimtrain_rate(device, lay, **kw),
              'raw': lambda lay=layout, kw=kwargs: raw_rate(device, lay, **kw)}
      tables[(variant, layout, batch)] = bench_util.repeat_variants(runs, repeats, out=out)
    cell_seconds = time.perf_counter() - cell_start
    if slowest[kind] == FIRST_CELL_ESTIMATE_S[kind]:
      slowest[kind] = cell_seconds
    else:
      slowest[kind] = max(slowest[kind], cell_seconds)
  _print_throughput(tables, warmup, steps, repeats, out)
  for (variant, layout, batch), estimate in skipped.items():
    print('skipped (time budget %.0f s): %s %s batch %d, estimated %.0f s' % (
        time_budget_s, variant, layout, batch, estimate), file=out)
  return tables, skipped


def throughput_json(tables, skipped, device, image_size, warmup, steps, repeats, paired):
  """A JSON-ready dict of the table: every rate, the medians and the ratios."""
  cells = []
  for (variant, layout, batch), results in tables.items():
    fp32 = tables.get(('fp32', layout, batch))
    cells.append({
        'variant': variant, 'layout': layout, 'batch': batch,
        'slimtrain_img_per_sec': results['slimtrain'], 'raw_img_per_sec': results['raw'],
        'slimtrain_median': bench_util.median(results['slimtrain']),
        'raw_median': bench_util.median(results['raw']),
        'slimtrain_over_raw': bench_util.ratio(results['slimtrain'], results['raw']),
        'paired_ratios': bench_util.paired_ratios(results['slimtrain'], results['raw']),
        'verdict_0.98': bench_util.verdict(results['slimtrain'], results['raw'], 0.98),
        'raw_speedup_over_fp32': (bench_util.ratio(results['raw'], fp32['raw'])
                                  if fp32 is not None else None)})
  return {'net': FLAGS.net, 'device': device, 'image_size': image_size, 'warmup': warmup,
          'steps': steps, 'repeats': repeats, 'paired': paired,
          'warmup_min_s': PAIRED_WARMUP_MIN_S if paired else 0, 'cells': cells,
          'skipped': [{'variant': v, 'layout': lay, 'batch': b, 'estimated_s': est}
                      for (v, lay, b), est in skipped.items()]}


def _print_throughput(tables, warmup, steps, repeats, out):
  print('\n%s images/sec, synthetic, %d warm-up + %d timed steps x %d repeats'
        % (FLAGS.net, warmup, steps, repeats), file=out)
  print('| variant | layout | batch | slimtrain median | raw median | spread slimtrain / raw % '
        '| slimtrain/raw |', file=out)
  print('| --- | --- | ---: | ---: | ---: | ---: | ---: |', file=out)
  for (variant, layout, batch), results in tables.items():
    spreads = ['%.0f' % bench_util.spread_percent(v)
               for v in (results['slimtrain'], results['raw'])]
    print('| %s | %s | %d | %.1f | %.1f | %s | %.3f |' % (
        variant, layout, batch, bench_util.median(results['slimtrain']),
        bench_util.median(results['raw']), ' / '.join(spreads),
        bench_util.ratio(results['slimtrain'], results['raw'])), file=out)
  for (variant, layout, batch), results in tables.items():
    print(bench_util.ratio_line('slimtrain/raw %s %s batch %d' % (variant, layout, batch),
                                results['slimtrain'], results['raw'], goal=0.98), file=out)
  for (variant, layout, batch), results in tables.items():
    fp32 = tables.get(('fp32', layout, batch))
    if variant != 'fp32' and fp32 is not None:
      print(bench_util.ratio_line('raw %s/fp32 %s batch %d [speed-up]' % (
          variant, layout, batch), results['raw'], fp32['raw']), file=out)


def main(argv):
  del argv
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  logging.set_verbosity(logging.WARNING)
  tf.get_logger().setLevel('ERROR')
  has_gpu = bool(tf.config.list_physical_devices('GPU'))
  warmup, steps, repeats = FLAGS.warmup, FLAGS.steps, FLAGS.repeats
  image_size, layouts = FLAGS.image_size, FLAGS.layouts
  batch_sizes = [int(b) for b in FLAGS.batch_sizes]
  clones = [int(c) for c in FLAGS.clones if c]
  variants = list(FLAGS.variants)
  unknown = sorted(set(variants) - set(VARIANTS))
  if unknown:
    raise app.UsageError('--variants: unknown %s (known: %s)' % (
        ', '.join(unknown), ', '.join(VARIANTS)))
  clone_batch, modes = FLAGS.clone_batch_size, list(clone_scaling.MODES)
  minimum = PAIRED_MINIMUM if FLAGS.paired else FULL_MINIMUM
  if FLAGS.quick:
    # A tiny stand-in for ResNet-50 (the backbones' small ResNet, 32x32).
    FLAGS.net, warmup, steps, repeats, image_size, layouts = 'small_resnet', 2, 10, 1, 32, ['NHWC']
    batch_sizes, clone_batch = [2], 2
    clones = [2] if FLAGS.clones else []
    modes = ['replicated', 'independent']
    if FLAGS.paired:  # Enough segments for a paired verdict, each short.
      warmup, steps, repeats = 1, 2, bench_util.MIN_REPEATS_TO_RESOLVE
  elif warmup < minimum['warmup'] or steps < minimum['steps'] or repeats < minimum['repeats']:
    raise app.UsageError('%s mode needs --warmup >= %d, --steps >= %d, --repeats >= %d' % (
        'paired' if FLAGS.paired else 'full', minimum['warmup'], minimum['steps'],
        minimum['repeats']))
  elif not has_gpu and not FLAGS.allow_cpu:
    raise app.UsageError('no GPU visible: run with --quick (CPU smoke) or --allow_cpu')
  device = 'gpu' if has_gpu else 'cpu'
  if device == 'cpu':
    layouts = [lay for lay in layouts if lay == 'NHWC'] or ['NHWC']  # CPU kernels: NHWC only
  max_clones = max(clones + [1])
  if device == 'gpu':
    clone_scaling.split_gpu(max_clones, FLAGS.gpu_memory_mb)
  tf.compat.v1.disable_eager_execution()
  print('device: %s; GPU figures %s' % (device, 'measured' if has_gpu else
                                       'are owed (CPU smoke run only)'), flush=True)
  session_kwargs = {'max_clones': max_clones, 'gpu_memory_mb': FLAGS.gpu_memory_mb}
  tables, skipped = run_throughput(device, layouts, batch_sizes, image_size, warmup, steps,
                                   repeats, session_kwargs, variants=variants,
                                   paired=FLAGS.paired, time_budget_s=FLAGS.time_budget_s)
  if FLAGS.json_out:
    with open(FLAGS.json_out, 'w') as f:
      json.dump(throughput_json(tables, skipped, device, image_size, warmup, steps, repeats,
                                FLAGS.paired), f, indent=1)
  if clones:
    print('\n== clones on %s (%d images per clone)' % (
        'logical GPUs of GPU 0' if device == 'gpu' else 'virtual CPU devices', clone_batch))

    def model_fn():
      return bench_util.make_classifier(FLAGS.net, image_size, NUM_CLASSES)
    clone_scaling.run_benchmark(device, clones, modes, model_fn, clone_batch, image_size,
                                warmup, steps, repeats, gpu_memory_mb=FLAGS.gpu_memory_mb)


if __name__ == '__main__':
  app.run(main)
