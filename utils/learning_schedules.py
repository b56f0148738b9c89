"""Learning-rate schedules as graph tensors of the global step.

Each function takes the global step (an integer tensor, usually
`tf.compat.v1.train.get_or_create_global_step()`) and returns a scalar float32
tensor whose op is named `.../learning_rate`, so that summaries and tests can
find it. The values follow the Object Detection API's `learning_schedules`
exactly; `builders/optimizer_builder.py` calls these from an `Optimizer`
config, but they are usable on their own:

    global_step = tf.compat.v1.train.get_or_create_global_step()
    learning_rate = learning_schedules.cosine_decay_with_warmup(
        global_step, learning_rate_base=0.04, total_steps=25000,
        warmup_learning_rate=0.013, warmup_steps=2000)
    optimizer = tf.compat.v1.train.MomentumOptimizer(learning_rate, 0.9)

Schedules:

* `exponential_decay_with_burnin`: a constant burn-in rate for the first
  steps, then exponential decay counted from the end of the burn-in, never
  below a minimum.
* `exponential_decay_with_warmup`: like the burn-in schedule, but the first
  steps ramp linearly from a warmup rate up to the base rate.
* `cosine_decay_with_warmup`: linear warmup, an optional hold at the base
  rate, then half a cosine down to 0 at `total_steps` (0 afterwards).
* `manual_stepping`: piecewise-constant rates at given step boundaries,
  optionally reaching the first boundary by a linear ramp.
"""

import numpy as np
import tensorflow as tf


def _float_step(global_step):
  return tf.cast(global_step, tf.float32)


def _linear_ramp(step, rate_at_zero, rate_at_end, length):
  """The straight line from `rate_at_zero` (step 0) to `rate_at_end`.

  Args:
    step: float32 scalar tensor.
    rate_at_zero: Python float, the value at step 0.
    rate_at_end: Python float, the value at step `length`.
    length: positive Python int.

  Returns:
    A float32 scalar tensor.
  """
  rise_per_step = (rate_at_end - rate_at_zero) / length
  return rate_at_zero + rise_per_step * step


def _select_first(overrides, fallback, name):
  """Picks the value of the first `(condition, value)` pair that holds.

  Args:
    overrides: list of `(bool tensor, float32 tensor)` pairs, by priority.
    fallback: float32 tensor used when no condition holds.
    name: name of the resulting op.

  Returns:
    A float32 scalar tensor named `name`.
  """
  # Fold from the lowest priority up so the first pair ends outermost.
  chosen = fallback
  for condition, value in reversed(overrides[1:]):
    chosen = tf.where(condition, value, chosen)
  condition, value = overrides[0]
  return tf.where(condition, value, chosen, name=name)


def _check_stepping(boundaries, rates):
  """Rejects `manual_stepping` arguments it cannot turn into a schedule.

  Args:
    boundaries: the caller's step boundaries.
    rates: the caller's rates.

  Raises:
    ValueError: naming the first rule the arguments break.
  """
  if not all(isinstance(b, int) and b >= 0 for b in boundaries):
    raise ValueError('boundaries must be a list of positive integers')
  for earlier, later in zip(boundaries, boundaries[1:]):
    if later <= earlier:
      raise ValueError('Entries in boundaries must be strictly increasing.')
  if not all(isinstance(r, float) for r in rates):
    raise ValueError('Learning rates must be floats')
  if len(boundaries) + 1 != len(rates):
    raise ValueError('Number of provided learning rates must exceed '
                     'number of boundary points by exactly 1.')
  if boundaries and not boundaries[0]:
    raise ValueError('First step cannot be zero.')


def _step_table(boundaries, rates, warmup):
  """Expands `manual_stepping`'s arguments into per-threshold rates.

  Args:
    boundaries: validated list of step boundaries.
    rates: validated list of rates, one more than `boundaries`.
    warmup: whether the steps before `boundaries[0]` ramp linearly.

  Returns:
    `(thresholds, table)`: the rate at a step is `table[k]` where `k` is the
    number of thresholds that are `<=` the step, so `len(table) ==
    len(thresholds) + 1`.
  """
  if not (warmup and boundaries):
    return boundaries, rates
  first = boundaries[0]
  # One threshold per step of the ramp, each with its own interpolated rate.
  ramp = [rates[0] + (rates[1] - rates[0]) * k / first for k in range(first)]
  return list(range(1, first)) + boundaries, ramp + rates[1:]


def exponential_decay_with_burnin(global_step,
                                  learning_rate_base,
                                  learning_rate_decay_steps,
                                  learning_rate_decay_factor,
                                  burnin_learning_rate=0.0,
                                  burnin_steps=0,
                                  min_learning_rate=0.0,
                                  staircase=True):
  """Exponential decay after a burn-in period at a fixed rate.

  For `step < burnin_steps` the rate is `burnin_learning_rate`; afterwards it
  is `learning_rate_base * learning_rate_decay_factor ** (
  (step - burnin_steps) / learning_rate_decay_steps)` (the exponent floored
  when `staircase`). The result is never below `min_learning_rate`.

  Args:
    global_step: integer scalar tensor, the training step.
    learning_rate_base: the rate decay starts from.
    learning_rate_decay_steps: steps per decay by `learning_rate_decay_factor`.
    learning_rate_decay_factor: multiplicative decay factor.
    burnin_learning_rate: rate during burn-in; 0.0 means `learning_rate_base`.
    burnin_steps: number of burn-in steps.
    min_learning_rate: lower bound of the rate.
    staircase: whether the decay happens in discrete steps.

  Returns:
    A scalar float32 tensor named `learning_rate`.
  """
  if burnin_learning_rate == 0:
    burnin_learning_rate = learning_rate_base
  post_burnin_learning_rate = tf.compat.v1.train.exponential_decay(
      learning_rate_base,
      global_step - burnin_steps,
      learning_rate_decay_steps,
      learning_rate_decay_factor,
      staircase=staircase)
  in_burnin = tf.less(tf.cast(global_step, tf.int32), tf.constant(burnin_steps))
  return tf.maximum(
      tf.where(in_burnin, tf.constant(burnin_learning_rate, tf.float32),
               post_burnin_learning_rate),
      min_learning_rate, name='learning_rate')


def exponential_decay_with_warmup(global_step,
                                  learning_rate_base,
                                  learning_rate_decay_steps,
                                  learning_rate_decay_factor,
                                  warmup_learning_rate=0.0,
                                  warmup_steps=0,
                                  min_learning_rate=0.0,
                                  staircase=True):
  """Exponential decay after a linear warmup.

  For `step < warmup_steps` the rate rises linearly from
  `warmup_learning_rate` (at step 0) towards `learning_rate_base` (reached at
  `warmup_steps`); afterwards it is the decay of `exponential_decay_with_burnin`
  counted from `warmup_steps`, never below `min_learning_rate`.

  Args:
    global_step: integer scalar tensor, the training step.
    learning_rate_base: the rate at the end of warmup.
    learning_rate_decay_steps: steps per decay by `learning_rate_decay_factor`.
    learning_rate_decay_factor: multiplicative decay factor.
    warmup_learning_rate: the rate at step 0.
    warmup_steps: number of warmup steps.
    min_learning_rate: lower bound of the rate after warmup.
    staircase: whether the decay happens in discrete steps.

  Returns:
    A scalar float32 tensor named `learning_rate`.

  Raises:
    ValueError: if `learning_rate_base < warmup_learning_rate`.
  """
  if learning_rate_base < warmup_learning_rate:
    raise ValueError('learning_rate_base must be larger or equal to '
                     'warmup_learning_rate.')
  post_warmup_learning_rate = tf.maximum(
      tf.compat.v1.train.exponential_decay(
          learning_rate_base,
          global_step - warmup_steps,
          learning_rate_decay_steps,
          learning_rate_decay_factor,
          staircase=staircase),
      min_learning_rate)
  if warmup_steps > 0:
    warmup_rate = _linear_ramp(_float_step(global_step), warmup_learning_rate,
                               learning_rate_base, warmup_steps)
  else:
    warmup_rate = post_warmup_learning_rate
  in_warmup = tf.less(tf.cast(global_step, tf.int32), tf.constant(warmup_steps))
  return tf.where(in_warmup, warmup_rate, post_warmup_learning_rate,
                  name='learning_rate')


def cosine_decay_with_warmup(global_step,
                             learning_rate_base,
                             total_steps,
                             warmup_learning_rate=0.0,
                             warmup_steps=0,
                             hold_base_rate_steps=0):
  """Cosine decay with linear warmup and an optional hold at the base rate.

  With `w = warmup_steps` and `h = hold_base_rate_steps` the rate is
  `warmup_learning_rate + step * (learning_rate_base - warmup_learning_rate) / w`
  for `step < w`, `learning_rate_base` for `w <= step <= w + h` (when `h > 0`),
  `0.5 * learning_rate_base * (1 + cos(pi * (step - w - h) / (total_steps - w -
  h)))` up to `total_steps` and 0 after it (Loshchilov & Hutter, SGDR, 2016).

  Args:
    global_step: integer scalar tensor, the training step.
    learning_rate_base: the peak rate.
    total_steps: the step at which the rate reaches 0.
    warmup_learning_rate: the rate at step 0 when `warmup_steps > 0`.
    warmup_steps: number of warmup steps.
    hold_base_rate_steps: steps to hold the base rate after warmup.

  Returns:
    A scalar float32 tensor named `learning_rate`.

  Raises:
    ValueError: if `total_steps < warmup_steps`, or, with warmup, if
      `learning_rate_base < warmup_learning_rate`.
  """
  if total_steps < warmup_steps:
    raise ValueError('total_steps must be larger or equal to warmup_steps.')
  if warmup_steps > 0 and learning_rate_base < warmup_learning_rate:
    raise ValueError('learning_rate_base must be larger or equal to '
                     'warmup_learning_rate.')
  step = _float_step(global_step)
  decay_start = warmup_steps + hold_base_rate_steps
  # How far along the half cosine we are: 0 at `decay_start`, 1 at the end.
  progress = (step - decay_start) / float(total_steps - decay_start)
  annealed = learning_rate_base * 0.5 * (1.0 + tf.cos(np.pi * progress))

  # Earlier entries win; the cosine applies where none of them does.
  overrides = [(global_step > total_steps, tf.constant(0.0, tf.float32))]
  if warmup_steps > 0:
    ramp = _linear_ramp(step, warmup_learning_rate, learning_rate_base,
                        warmup_steps)
    overrides.append((global_step < warmup_steps, ramp))
  if hold_base_rate_steps > 0:
    overrides.append((global_step <= decay_start,
                      tf.constant(learning_rate_base, tf.float32)))
  return _select_first(overrides, annealed, name='learning_rate')


def manual_stepping(global_step, boundaries, rates, warmup=False):
  """Piecewise-constant learning rate, optionally with a linear warmup.

  `rates[0]` applies before `boundaries[0]`, `rates[i]` from `boundaries[i-1]`
  on. With `warmup`, the steps before `boundaries[0]` instead ramp linearly
  from `rates[0]` towards `rates[1]`, one value per step. For example
  boundaries `[2, 3, 7]` and rates `[1., 2., 3., 4.]` give
  `[1, 1, 2, 3, 3, 3, 3, 4, 4, 4]` at steps 0..9.

  Args:
    global_step: integer scalar tensor, the training step.
    boundaries: strictly increasing list of positive Python ints (may be
      empty).
    rates: list of Python floats, one more than `boundaries`.
    warmup: whether to ramp linearly up to the first boundary.

  Returns:
    A scalar float32 tensor named `learning_rate`.

  Raises:
    ValueError: if boundaries are not non-negative ints or not strictly
      increasing, if rates are not floats, if `len(rates) !=
      len(boundaries) + 1`, or if the first boundary is 0.
  """
  _check_stepping(boundaries, rates)
  thresholds, table = _step_table(list(boundaries), list(rates), warmup)
  # The rate index is simply how many thresholds the step has reached.
  reached = tf.greater_equal(tf.cast(global_step, tf.int64),
                             tf.constant(thresholds, tf.int64))
  index = tf.reduce_sum(tf.cast(reached, tf.int32))
  return tf.gather(tf.constant(table, tf.float32), index, name='learning_rate')
