"""Trainer overhead in interleaved bursts: trainer.train and a bare loop in turns.

`benchmarks.overhead` times each variant in its own run, a few seconds apart.
On a shared 2-core machine two such runs differ by 5-15 % (the machine's speed
moves between them), far more than the 2 % the overhead goal is about, so its
ratios often do not resolve. Here the bare loop runs *inside* the trainer's
run: its graph and session are built and started first; then, after every K
timed trainer steps, K steps of the bare loop run, and so on. Each pair of
bursts is measured within seconds, so a drift of the machine's speed reaches
both variants alike, and a repeat's ratio is the sum of the bare bursts' time
over the sum of the trainer bursts' time.

    python -m benchmarks.overhead_paired --models=resnet_v1_50 --burst=10

What is paired (same model, data, thread setting and step counts as
`benchmarks.overhead`):

* (a) trainer.train against (c) a `Session.run` loop over the same
  BatchQueue, and (a') (gradient-norm check off) against its own (c);
* a trainer burst counts from the end of the previous burst (or of the
  warm-up) to the end of its last step, so it includes the trainer's loop
  between steps; the bare loop's queue runners idle on a full queue while the
  trainer runs, and the trainer's while the bare loop runs;
* the variants' order alternates between repeats ((a), (a'), then (a'),
  (a)); the verdict rule is `benchmarks.bench_util.verdict`'s (every repeat
  on one side of the goal, at least 5 repeats);
* each repeat also gives the median, over its burst pairs, of a pair's time
  ratio: one burst slowed by another tenant moves that median little, while
  it moves the repeat's summed ratio by its whole delay.
"""

import sys
import time

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf

from benchmarks import bench_util
from benchmarks import overhead

FLAGS = flags.FLAGS
flags.DEFINE_integer('burst', 10, 'Steps per burst of each variant.')

PAIRS = (('a', True), ('a_nocheck', False))


def run_paired(spec, burst, check_gradient_norm):
  """One repeat: the trainer and a bare loop in alternating bursts of `burst` steps.

  Args:
    spec: an overhead.Spec; spec.steps must be a multiple of `burst`.
    burst: steps per burst.
    check_gradient_norm: the trainer's train_config.check_gradient_norm.

  Returns:
    (trainer images/sec, bare loop images/sec) over the timed bursts, and
    the median over burst pairs of (bare burst time / trainer burst time).
  """
  graph, fetches = overhead.bare_loop_graph(spec, lambda: overhead.batch_queue_inputs(spec))
  seconds = {'trainer': [], 'bare': []}  # one entry per burst
  with overhead.started_session(spec, graph) as bare_sess:
    bare_step = bare_sess.make_callable(fetches)
    for _ in range(spec.warmup):
      bare_step()
    trainer_steps, burst_start = 0, None

    def step_then_bare_burst(run_step, sess, train_op, global_step):
      nonlocal trainer_steps, burst_start
      del sess, train_op, global_step
      result = run_step()
      trainer_steps += 1
      timed = trainer_steps - spec.warmup
      if timed == 0:
        burst_start = time.perf_counter()
      elif 0 < timed <= spec.steps and timed % burst == 0:
        seconds['trainer'].append(time.perf_counter() - burst_start)
        start = time.perf_counter()
        for _ in range(burst):
          bare_step()
        seconds['bare'].append(time.perf_counter() - start)
        burst_start = time.perf_counter()
      return result

    # One step past the timed ones, so the last burst does not include the
    # trainer's end of training (its log line, the session close's watch).
    overhead.train_with_step_wrapper(spec, step_then_bare_burst, check_gradient_norm,
                                     extra_steps=1)
  images = spec.steps * spec.batch_size
  pair_ratio = bench_util.median([bare / trainer for trainer, bare in zip(
      seconds['trainer'], seconds['bare'])])
  return images / sum(seconds['trainer']), images / sum(seconds['bare']), pair_ratio


def run_benchmark(spec, repeats, burst, out=sys.stdout):
  """Measures (a)/(c) and (a')/(c) in bursts; prints rates, ratios and verdicts.

  Returns:
    dict {'a', 'c_for_a', 'a_nocheck', 'c_for_a_nocheck': [images/sec per repeat]}.
  """
  print('\n== %s %dx%d, batch %d, %d threads, %d warm-up + %d timed steps in bursts of %d'
        ' x %d repeats' % (spec.net, spec.image_size, spec.image_size, spec.batch_size,
                           spec.threads, spec.warmup, spec.steps, burst, repeats),
        file=out, flush=True)
  results, pair_ratios = {}, {}
  for repeat in range(repeats):
    for name, check in (PAIRS[::-1] if repeat % 2 else PAIRS):
      trainer_rate, bare_rate, pair_ratio = run_paired(spec, burst, check)
      results.setdefault(name, []).append(trainer_rate)
      results.setdefault('c_for_' + name, []).append(bare_rate)
      pair_ratios.setdefault(name, []).append(pair_ratio)
      print('  repeat %d %-10s %10.1f   bare loop beside it %10.1f   ratio %.3f   '
            'median burst pair %.3f' % (repeat + 1, name, trainer_rate, bare_rate,
                                        trainer_rate / bare_rate, pair_ratio),
            file=out, flush=True)
  labels = {'a': overhead.LABELS['a'], 'a_nocheck': overhead.LABELS['a_nocheck'],
            'c_for_a': '(c) Session loop, in bursts beside (a)',
            'c_for_a_nocheck': "(c) Session loop, in bursts beside (a')"}
  bench_util.print_table('%s images/sec, interleaved' % spec.net, results, 'img/s', labels,
                         out=out)
  print(bench_util.ratio_line('(a)/(c) interleaved', results['a'], results['c_for_a'],
                              goal=overhead.TRAINER_GOAL), file=out)
  print(bench_util.ratio_line("(a')/(c) interleaved [without the gradient-norm check]",
                              results['a_nocheck'], results['c_for_a_nocheck'],
                              goal=overhead.TRAINER_GOAL), file=out)
  for name, label in (('a', '(a)/(c)'), ('a_nocheck', "(a')/(c)")):
    print('ratio %s, median burst pair = %.3f (per repeat %s) goal >= %.2f: %s' % (
        label, bench_util.median(pair_ratios[name]),
        ' '.join('%.3f' % r for r in pair_ratios[name]), overhead.TRAINER_GOAL,
        bench_util.verdict(pair_ratios[name], [1.0] * repeats, overhead.TRAINER_GOAL)),
          file=out)
  check_price = [(a / ca) / (n / cn) for a, ca, n, cn in zip(
      results['a'], results['c_for_a'], results['a_nocheck'], results['c_for_a_nocheck'])]
  print("ratio of ratios ((a)/(c)) / ((a')/(c)) [price of the gradient-norm check] = %.3f "
        '(per repeat %s)' % (bench_util.median(check_price),
                             ' '.join('%.3f' % r for r in check_price)), file=out)
  out.flush()
  return results


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  tf.get_logger().setLevel('ERROR')
  warmup, steps, repeats, burst = FLAGS.warmup, FLAGS.steps, FLAGS.repeats, FLAGS.burst
  models, image_size = FLAGS.models, FLAGS.image_size
  if FLAGS.quick:
    warmup, steps, repeats, burst, models, image_size = 3, 20, 1, 5, ['small_cnn'], 16
  elif warmup < 10 or steps < 100 or repeats < 5:
    raise app.UsageError('full mode needs --warmup >= 10, --steps >= 100, --repeats >= 5')
  if burst < 1 or steps % burst:
    raise app.UsageError('--burst=%d must be >= 1 and divide --steps=%d' % (burst, steps))
  for net in models:
    spec = overhead.Spec(net, image_size, overhead.batch_size_for(net), FLAGS.threads,
                         warmup, steps)
    run_benchmark(spec, repeats, burst)


if __name__ == '__main__':
  app.run(main)
