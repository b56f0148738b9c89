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
    slope = (learning_rate_base - warmup_learning_rate) / warmup_steps
    warmup_rate = slope * _float_step(global_step) + warmup_learning_rate
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
  step = _float_step(global_step)
  decay_steps = float(total_steps - warmup_steps - hold_base_rate_steps)
  learning_rate = 0.5 * learning_rate_base * (1 + tf.cos(
      np.pi * (step - warmup_steps - hold_base_rate_steps) / decay_steps))
  if hold_base_rate_steps > 0:
    learning_rate = tf.where(
        global_step > warmup_steps + hold_base_rate_steps, learning_rate,
        tf.constant(learning_rate_base, tf.float32))
  if warmup_steps > 0:
    if learning_rate_base < warmup_learning_rate:
      raise ValueError('learning_rate_base must be larger or equal to '
                       'warmup_learning_rate.')
    slope = (learning_rate_base - warmup_learning_rate) / warmup_steps
    warmup_rate = slope * step + warmup_learning_rate
    learning_rate = tf.where(global_step < warmup_steps, warmup_rate,
                             learning_rate)
  return tf.where(global_step > total_steps, tf.constant(0.0, tf.float32),
                  learning_rate, name='learning_rate')


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
  if any(b < 0 for b in boundaries) or any(
      not isinstance(b, int) for b in boundaries):
    raise ValueError('boundaries must be a list of positive integers')
  if any(b_next <= b for b_next, b in zip(boundaries[1:], boundaries[:-1])):
    raise ValueError('Entries in boundaries must be strictly increasing.')
  if any(not isinstance(r, float) for r in rates):
    raise ValueError('Learning rates must be floats')
  if len(rates) != len(boundaries) + 1:
    raise ValueError('Number of provided learning rates must exceed '
                     'number of boundary points by exactly 1.')
  if boundaries and boundaries[0] == 0:
    raise ValueError('First step cannot be zero.')

  boundaries = list(boundaries)
  rates = list(rates)
  if warmup and boundaries:
    slope = (rates[1] - rates[0]) * 1.0 / boundaries[0]
    warmup_steps = list(range(boundaries[0]))
    warmup_rates = [rates[0] + slope * step for step in warmup_steps]
    boundaries = warmup_steps + boundaries
    rates = warmup_rates + rates[1:]
  else:
    boundaries = [0] + boundaries
  num_boundaries = len(boundaries)

  step = tf.cast(global_step, tf.int64)
  passed = tf.greater_equal(step, tf.constant(boundaries, tf.int64))
  rate_index = tf.reduce_max(
      tf.where(passed, tf.range(num_boundaries),
               tf.zeros([num_boundaries], tf.int32)))
  return tf.reduce_sum(
      tf.constant(rates, tf.float32) * tf.one_hot(rate_index, num_boundaries),
      name='learning_rate')
