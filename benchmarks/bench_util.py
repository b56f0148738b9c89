"""Shared pieces of the benchmarks: timing protocol, tables, synthetic data, models.

Every benchmark follows the tf_cnn_benchmarks protocol: warm-up steps that are
not timed, then timed steps, repeated; it reports the median rate and the
spread (min..max) over the repeats, with the variants of one benchmark
alternating inside each repeat so that a change in machine load hits them all
alike.

    rates = bench_util.repeat_variants({'a': run_a, 'c': run_c}, repeats=5)
    bench_util.print_table('overhead', rates, unit='img/s')
    print(bench_util.ratio_line('a/c', rates['a'], rates['c'], goal=0.95))

`run_a` etc. take no argument and return one rate (items/sec).

A goal is called met or missed only when the data resolve it (`verdict`):
the repeats pair up (repeat i of a with repeat i of c, measured back to back),
and only when every paired ratio lies on the same side of the goal, over at
least MIN_REPEATS_TO_RESOLVE repeats, is the result "met" or "missed";
otherwise it is "not resolved" and the line shows the range of the paired
ratios and each variant's spread. A median ratio alone never decides: on a
shared machine the run-to-run spread is often larger than the gap measured.
"""

import statistics
import sys
import time

import numpy as np
import tensorflow as tf


def median(values):
  return statistics.median(values)


def timed_steps(run_step, warmup, steps):
  """Runs `warmup` untimed then `steps` timed calls of run_step; returns steps/sec."""
  for _ in range(warmup):
    run_step()
  start = time.perf_counter()
  for _ in range(steps):
    run_step()
  return steps / (time.perf_counter() - start)


def rate_from_stamps(stamps, warmup, items_per_step):
  """Items/sec from per-step end times, skipping the first `warmup` steps.

  Args:
    stamps: perf_counter() values taken when each step finished.
    warmup: steps to skip (the clock starts when step `warmup` ends).
    items_per_step: images (or examples) one step consumes.

  Returns:
    items/sec over the steps after the warm-up.

  Raises:
    ValueError: when fewer than two timed steps were recorded.
  """
  timed = stamps[warmup:]
  if len(timed) < 2:
    raise ValueError('need at least 2 steps after %d warm-up steps, got %d stamps'
                     % (warmup, len(stamps)))
  return (len(timed) - 1) * items_per_step / (timed[-1] - timed[0])


def repeat_variants(variants, repeats, out=sys.stdout):
  """Runs each variant once per repeat, alternating; returns {name: [rates]}.

  Odd repeats run the variants in reverse order (a b c, c b a, a b c, ...),
  so a machine load that rises or falls during the run does not favour the
  variant that always runs last.

  Args:
    variants: ordered dict {name: callable() -> rate}; a value of None marks a
      variant that is unavailable (it is skipped).
    repeats: how many rates to collect per variant.
    out: progress goes here.

  Returns:
    dict {name: [rate, ...]} for the available variants.
  """
  results = {name: [] for name, fn in variants.items() if fn is not None}
  for repeat in range(repeats):
    order = list(variants.items())
    for name, fn in (order[::-1] if repeat % 2 else order):
      if fn is None:
        continue
      results[name].append(fn())
      print('  repeat %d %-28s %10.1f' % (repeat + 1, name, results[name][-1]),
            file=out, flush=True)
  return results


def print_table(title, results, unit, labels=None, out=sys.stdout):
  """Prints a markdown table: variant, median, min, max, spread %."""
  labels = labels or {}
  print('\n%s' % title, file=out)
  print('| variant | median %s | min | max | spread %% |' % unit, file=out)
  print('| --- | ---: | ---: | ---: | ---: |', file=out)
  for name, values in results.items():
    print('| %s | %.1f | %.1f | %.1f | %.0f |' % (labels.get(name, name), median(values),
                                                   min(values), max(values),
                                                   spread_percent(values)), file=out)


def ratio(numerator, denominator):
  """Ratio of the medians of two lists of rates."""
  return median(numerator) / median(denominator)


MIN_REPEATS_TO_RESOLVE = 5


def spread_percent(values):
  """(max - min) / median of a list of rates, in percent."""
  mid = median(values)
  return 100.0 * (max(values) - min(values)) / mid if mid else 0.0


def paired_ratios(numerator, denominator):
  """Ratio of each repeat: numerator[i] / denominator[i] (measured back to back)."""
  if len(numerator) != len(denominator):
    raise ValueError('paired ratios need as many repeats of each variant, got %d and %d'
                     % (len(numerator), len(denominator)))
  return [n / d for n, d in zip(numerator, denominator)]


def verdict(numerator, denominator, goal):
  """'met', 'missed' or 'not resolved' for goal ratio >= `goal`.

  Args:
    numerator, denominator: rates per repeat of two variants that alternated.
    goal: the ratio the numerator must reach.

  Returns:
    'met' when every paired ratio is >= goal, 'missed' when every one is
    below it, both only with at least MIN_REPEATS_TO_RESOLVE repeats;
    'not resolved' otherwise.
  """
  pairs = paired_ratios(numerator, denominator)
  if len(pairs) < MIN_REPEATS_TO_RESOLVE:
    return 'not resolved'
  if min(pairs) >= goal:
    return 'met'
  if max(pairs) < goal:
    return 'missed'
  return 'not resolved'


def ratio_line(name, numerator, denominator, goal=None):
  """One line: median ratio, per-repeat ratios, spreads and (with a goal) the verdict.

  Example: 'ratio (a)/(c) = 0.981 (per repeat 0.97 0.99 1.00 0.98 0.96; spreads
  12 % / 9 %) goal >= 0.98: not resolved'.
  """
  text = 'ratio %s = %.3f (per repeat %s; spreads %.0f %% / %.0f %%)' % (
      name, ratio(numerator, denominator),
      ' '.join('%.3f' % r for r in paired_ratios(numerator, denominator)),
      spread_percent(numerator), spread_percent(denominator))
  if goal is not None:
    text += ' goal >= %.2f: %s' % (goal, verdict(numerator, denominator, goal))
    if len(numerator) < MIN_REPEATS_TO_RESOLVE:
      text += ' (fewer than %d repeats)' % MIN_REPEATS_TO_RESOLVE
  return text


def synthetic_images(num_images, height, width, num_classes, seed=0):
  """In-memory uint8-range float images and 0-based int64 labels."""
  rng = np.random.RandomState(seed)
  images = rng.uniform(0, 255, size=(num_images, height, width, 3)).astype(np.float32)
  labels = rng.randint(0, num_classes, size=(num_images,)).astype(np.int64)
  return images, labels


def session_config(intra_op, inter_op, num_cpus=1):
  """ConfigProto with fixed thread pools (and `num_cpus` virtual CPU devices)."""
  return tf.compat.v1.ConfigProto(
      intra_op_parallelism_threads=intra_op, inter_op_parallelism_threads=inter_op,
      device_count={'CPU': num_cpus}, allow_soft_placement=True)


def make_classifier(net, image_size, num_classes, data_format=None):
  """A training SlimClassifier (dropout off, so every variant computes the same)."""
  from models import slim_classifier  # noqa: PLC0415  (keeps --help fast)
  del data_format  # tf_slim nets build NHWC; see gpu_throughput for NCHW.
  return slim_classifier.SlimClassifier(
      is_training=True, num_classes=num_classes, net=net, image_height=image_size,
      image_width=image_size, dropout_keep_prob=1.0)


def synthetic_batch(batch_size, image_size, num_classes, data_format='NHWC'):
  """A device-resident random batch: a local non-trainable variable + labels."""
  shape = ([batch_size, image_size, image_size, 3] if data_format == 'NHWC'
           else [batch_size, 3, image_size, image_size])
  images = tf.compat.v1.Variable(
      tf.random.truncated_normal(shape, mean=127.0, stddev=60.0), trainable=False,
      collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES], name='synthetic_images')
  labels = tf.random.uniform([batch_size], 0, num_classes, dtype=tf.int64)
  return images, labels


def clone_loss(model_fn, batch_size, image_size, num_classes=10):
  """model_fn of one clone: synthetic batch -> model -> losses in GraphKeys.LOSSES."""
  images, labels = synthetic_batch(batch_size, image_size, num_classes)
  model = model_fn()
  processed, shapes = model.preprocess(images)
  model.provide_groundtruth(labels)
  model.loss(model.predict(processed, shapes), shapes)
