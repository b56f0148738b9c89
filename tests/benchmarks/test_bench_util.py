"""Unit tests of the benchmarks' judging rule and of the scaling model's arithmetic.

No timing here: the verdict rule is fed fixed rates, and the scaling model is
checked on a tiny real graph whose variable sizes are known exactly.
"""

import io
import sys

import pytest
import tensorflow as tf

from benchmarks import bench_util
from benchmarks import scaling_equations
from benchmarks import scaling_model

tf.compat.v1.disable_eager_execution()


def test_goal_met_only_when_every_repeat_reaches_it():
  baseline = [100.0, 90.0, 110.0, 100.0, 95.0]
  assert bench_util.verdict([99.0, 89.0, 109.0, 99.0, 94.0], baseline, 0.98) == 'met'
  assert bench_util.verdict([90.0, 80.0, 100.0, 90.0, 85.0], baseline, 0.98) == 'missed'
  # One repeat on the other side of the goal: the data do not decide.
  assert bench_util.verdict([99.0, 89.0, 109.0, 99.0, 90.0], baseline, 0.98) == 'not resolved'


def test_fewer_than_five_repeats_never_resolve():
  assert bench_util.verdict([200.0] * 4, [100.0] * 4, 0.9) == 'not resolved'
  line = bench_util.ratio_line('a/b', [200.0] * 4, [100.0] * 4, goal=0.9)
  assert 'not resolved (fewer than 5 repeats)' in line, line


def test_ratio_line_lists_every_repeat_and_both_spreads():
  line = bench_util.ratio_line('a/c', [90.0, 110.0, 100.0, 100.0, 100.0],
                               [100.0, 100.0, 100.0, 100.0, 100.0], goal=0.95)
  assert 'per repeat 0.900 1.100 1.000 1.000 1.000' in line, line
  assert 'spreads 20 % / 0 %' in line, line
  assert line.endswith('goal >= 0.95: not resolved'), line


def test_repeats_alternate_and_reverse_the_order_every_other_repeat():
  calls = []
  variants = {name: (lambda name=name: calls.append(name) or 1.0) for name in 'abc'}
  variants['skipped'] = None
  results = bench_util.repeat_variants(variants, 3, out=io.StringIO())
  assert ''.join(calls) == 'abccbaabc'
  assert sorted(results) == ['a', 'b', 'c']


def test_paired_ratios_need_as_many_repeats_of_each_variant():
  with pytest.raises(ValueError, match='as many repeats'):
    bench_util.paired_ratios([1.0, 2.0], [1.0])


def _three_variables():
  """global step + a 1000-float trainable + a 10-float non-trainable variable."""
  def build():
    tf.compat.v1.get_variable('w', [1000], use_resource=True)
    tf.compat.v1.get_variable('moving', [10], trainable=False, use_resource=True)
  return scaling_model.model_variables(build)


def test_shards_follow_round_robin_placement():
  variables = _three_variables()
  assert [size for _, size, _ in variables] == [8, 4000, 40]
  one = scaling_model.shard_traffic(variables, 1)
  assert (one.down, one.up) == ([4000], [8 + 4000 + 40])
  # round robin: step -> task 0, w -> task 1, moving -> task 0.
  two = scaling_model.shard_traffic(variables, 2)
  assert (two.down, two.up) == ([0, 4000], [48, 4000])
  # A trainable variable moves twice (value and gradient), the others once.
  assert (one.tensors, two.tensors) == ([4], [2, 2])


def test_async_step_is_bound_by_the_worker_or_by_the_busiest_ps_link():
  shards = scaling_model.Shards(down=[1000, 3000], up=[1000, 3000], tensors=[2, 4])
  # Worker-bound: 1 s compute + 8000 B at 1000 B/s + 2 round trips of 0.5 s.
  assert scaling_model.predict_ps(shards, 1.0, 1, 1000.0, 0.5, sync=False) == pytest.approx(10.0)
  # Each of the 6 tensors adds 0.25 s to the worker.
  assert scaling_model.predict_ps(shards, 1.0, 1, 1000.0, 0.5, sync=False,
                                  tensor_s=0.25) == pytest.approx(11.5)
  # ps-bound: 10 workers x 3000 B through task 1's link.
  assert scaling_model.predict_ps(shards, 1.0, 10, 1000.0, 0.5, sync=False) == pytest.approx(30.0)


def test_sync_step_adds_the_burst_of_every_worker():
  shards = scaling_model.Shards(down=[1000, 3000], up=[1000, 3000])
  # 1 s + 4 workers x (3000 + 3000) B at 1000 B/s + 4 round trips of 0.5 s.
  assert scaling_model.predict_ps(shards, 1.0, 4, 1000.0, 0.5, sync=True) == pytest.approx(27.0)


def test_shared_cores_step_counts_the_measured_cpu_of_every_transfer_and_a_call_per_ps():
  shards = scaling_model.Shards(down=[1000, 3000], up=[1000, 3000], tensors=[2, 4])
  # CPU of both ends: 1 ms per byte, 0.25 s per tensor, 0.5 s per round trip; the
  # wall-clock figures (bandwidth, round trip) take no part.
  link = scaling_equations.LinkFigures(1.0, 9.0, 9.0, 9.0, cpu_round_trip_s=0.5,
                                       cpu_per_tensor_s=0.25, cpu_per_byte_s=1e-3)
  # Async, 2 ps: 8000 B x 1 ms + 6 tensors x 0.25 s + 2 x 2 round trips x 0.5 s =
  # 11.5 s, + 1 s compute = 12.5 s per worker step; 3 workers on 2 cores: 18.75 s.
  assert scaling_model.shared_cores_step(shards, 1.0, 3, False, 2, link) == pytest.approx(18.75)
  # Sync adds the token and the step read: 2 more round trips (+ 1 s per worker step).
  assert scaling_model.shared_cores_step(shards, 1.0, 3, True, 2, link) == pytest.approx(20.25)


def test_ring_all_reduce_moves_two_n_minus_one_over_n_of_the_gradients():
  assert scaling_model.predict_allreduce(4000, 1.0, 1, 1000.0, 0.0) == 1.0
  assert scaling_model.predict_allreduce(4000, 1.0, 4, 1000.0, 0.0) == pytest.approx(7.0)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
