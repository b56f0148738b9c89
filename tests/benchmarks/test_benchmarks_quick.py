"""Smoke test: every benchmark's `--quick` mode runs to the end and prints its figures.

How fast anything is stays unchecked (a timed unit test on a shared machine
would only be flaky; the benchmarks are measured by hand and recorded in
benchmarks/RESULTS.md). What is checked is that the printed figures are
figures: every ratio line carries a positive finite ratio and one positive
ratio per repeat, every rate table's min <= median <= max, and the scaling
check's predicted/measured column is its predicted rate over its measured
median. And that each ratio means what its name says: every ratio line is
recomputed from the rates the same output prints for its two sides (per
repeat where the repeats are printed), numerator over denominator as named,
so a ratio computed the wrong way round, or of the wrong pair, fails
(`quick_testlib.assert_ratio_is`). Each script runs in its own process, as a
user runs it.
"""

import re
import subprocess
import sys

import pytest

from benchmarks import bench_util

from tests import fork_server
from tests.benchmarks import quick_testlib

REPO_ROOT = quick_testlib.REPO_ROOT
run_quick = quick_testlib.run_quick
assert_figures = quick_testlib.assert_figures
assert_ratio_is = quick_testlib.assert_ratio_is

# benchmarks/overhead.py's ratio lines: name -> (numerator, denominator) variants.
_OVERHEAD_RATIOS = {
    '(a)/(c)': ('a', 'c'),
    "(a')/(c) [without the gradient-norm check]": ('a_nocheck', 'c'),
    "(a)/(a') [price of the gradient-norm check]": ('a', 'a_nocheck'),
    "(a')/(g) [the trainer's runtime: Supervisor, threads, Python]": ('a_nocheck', 'c_graph'),
    "(g)/(c) [the trainer's graph beyond the bare one]": ('c_graph', 'c'),
    "(b)/(c')": ('b', 'c_data'),
    '(a)/(d)': ('a', 'd'),
    "(c)/(c') [BatchQueue vs tf.data input]": ('c', 'c_data'),
}


def _check_ratios_by_name(stdout, ratios, rates, **kwargs):
  """Every ratio line of `stdout` is in `ratios` ({name: (num, den)}) and is rates[num] /
  rates[den]."""
  names = set(quick_testlib.ratio_lines(stdout))
  assert names and names <= set(ratios), (sorted(names - set(ratios)), stdout[-3000:])
  for name in names:
    num, den = ratios[name]
    assert_ratio_is(stdout, name, rates[num], rates[den], **kwargs)


def _input_pipeline_ratios(stdout):
  # Its own table: 'label  median  min  max' (ex/s); the repeats are not printed.
  medians = {}
  for key, label in (('a', '(a) BatchQueue + prefetch'), ('b', '(b) tf.data padded_batch'),
                     ('a+', '(a+) (a), autotuning on'), ('b+', '(b+) (b), autotuning on')):
    row = re.search(r'^%s +([0-9.]+) ' % re.escape(label), stdout, re.M)
    if row:
      medians[key] = [float(row.group(1))]
  _check_ratios_by_name(stdout, {'a/b': ('a', 'b'), 'a/a+': ('a', 'a+'), 'b/b+': ('b', 'b+')},
                        medians)


def _input_fn_feeding_ratios(stdout):
  rates = quick_testlib.repeat_rates(stdout)
  assert_ratio_is(stdout, 'fed/const examples/sec', rates['fed'], rates['const'])
  # CPU per example: the medians of its second table (two decimals).
  cpu = {}
  for key, label in (('fed', 'fed (from_generator, now)'), ('const', 'graph constants (before)')):
    row = re.search(r'^\| %s \| \d+ \|(.*)$' % re.escape(label), stdout, re.M)
    assert row, stdout[-3000:]
    cpu[key] = [float(row.group(1).split('|')[3])]
  assert_ratio_is(stdout, 'fed/const CPU per example', cpu['fed'], cpu['const'], num_places=2)


def _overhead_ratios(stdout):
  _check_ratios_by_name(stdout, _OVERHEAD_RATIOS, quick_testlib.repeat_rates(stdout))


def _overhead_paired_ratios(stdout):
  trainer, bare, ratio, pair = {}, {}, {}, {}
  for line in re.finditer(r'^  repeat \d+ (\S+) +([0-9.]+)   bare loop beside it +([0-9.]+)   '
                          r'ratio ([0-9.]+)   median burst pair ([0-9.]+)$', stdout, re.M):
    for table, value in zip((trainer, bare, ratio, pair), line.groups()[1:]):
      table.setdefault(line.group(1), []).append(float(value))
  assert set(trainer) == {'a', 'a_nocheck'}, stdout[-3000:]
  assert_ratio_is(stdout, '(a)/(c) interleaved', trainer['a'], bare['a'])
  assert_ratio_is(stdout, "(a')/(c) interleaved [without the gradient-norm check]",
                  trainer['a_nocheck'], bare['a_nocheck'])
  for name, key in (('(a)/(c), median burst pair', 'a'),
                    ("(a')/(c), median burst pair", 'a_nocheck')):
    assert_ratio_is(stdout, name, pair[key], [1.0] * len(pair[key]), num_places=3,
                    den_places=9, median_of_ratios=True)
  assert_ratio_is(stdout, "of ratios ((a)/(c)) / ((a')/(c)) [price of the gradient-norm check]",
                  ratio['a'], ratio['a_nocheck'], num_places=3, median_of_ratios=True)
  assert len(quick_testlib.ratio_lines(stdout)) == 5, stdout[-3000:]


_CLONE_RATIO = re.compile(r'(\w+) x(\d+) / independent x\2')


def _clone_ratio(stdout, name, rates):
  """'MODE xN / independent xN' is MODE's rate over the independent control's."""
  mode, n = _CLONE_RATIO.fullmatch(name).groups()
  assert_ratio_is(stdout, name, rates['%s x%s' % (mode, n)], rates['independent x%s' % n])


def _clone_scaling_ratios(stdout):
  rates = quick_testlib.repeat_rates(stdout)
  names = quick_testlib.ratio_lines(stdout)
  assert names, stdout[-3000:]
  for name in names:
    _clone_ratio(stdout, name, rates)


def _shard_snapshots_ratios(stdout):
  rates = quick_testlib.repeat_rates(stdout)
  _check_ratios_by_name(stdout, {'on/off steps/sec (4 MB)': ('on', 'off')}, rates)


def _gpu_throughput_ratios(stdout):
  # Its table: | variant | layout | batch | slimtrain median | raw median | spreads | ratio |
  medians = {}
  for row in re.finditer(r'^\| (\w+) \| (\w+) \| (\d+) \| ([0-9.]+) \| ([0-9.]+) \|', stdout,
                         re.M):
    key = ' '.join(row.groups()[:2]) + ' batch ' + row.group(3)
    medians['slimtrain ' + key] = [float(row.group(4))]
    medians['raw ' + key] = [float(row.group(5))]
  names = quick_testlib.ratio_lines(stdout)
  assert names, stdout[-3000:]
  for name in names:
    if _CLONE_RATIO.fullmatch(name):  # Its clones section, as benchmarks.clone_scaling's.
      _clone_ratio(stdout, name, quick_testlib.repeat_rates(stdout))
      continue
    slim = re.fullmatch(r'slimtrain/raw (.+)', name)
    if slim:
      assert_ratio_is(stdout, name, medians['slimtrain ' + slim.group(1)],
                      medians['raw ' + slim.group(1)])
      continue
    variant, rest = re.fullmatch(r'raw (\w+)/fp32 (.+) \[speed-up\]', name).groups()
    assert_ratio_is(stdout, name, medians['raw %s %s' % (variant, rest)],
                    medians['raw fp32 %s' % rest])


def _zoo_ssd_training_ratios(stdout):
  rates = quick_testlib.repeat_rates(stdout)
  assert_ratio_is(stdout, '2 clones / 1 clone', rates['2 clones x 2'], rates['1 clone x 4'])


def _zoo_faster_rcnn_training_ratios(stdout):
  rates = quick_testlib.repeat_rates(stdout)
  assert_ratio_is(stdout, '2 clones / 1 clone', rates['2 clones x 1'], rates['1 clone x 2'])


_RATIO_CHECKS = {
    'benchmarks.zoo_ssd_training': _zoo_ssd_training_ratios,
    'benchmarks.zoo_faster_rcnn_training': _zoo_faster_rcnn_training_ratios,
    'benchmarks.input_pipeline': _input_pipeline_ratios,
    'benchmarks.input_fn_feeding': _input_fn_feeding_ratios,
    'benchmarks.overhead': _overhead_ratios,
    'benchmarks.overhead_paired': _overhead_paired_ratios,
    'benchmarks.clone_scaling': _clone_scaling_ratios,
    'benchmarks.shard_snapshots': _shard_snapshots_ratios,
    'benchmarks.gpu_throughput': _gpu_throughput_ratios,
}


@pytest.mark.slow
@pytest.mark.parametrize('module', [
    'benchmarks.input_pipeline',
    'benchmarks.input_fn_feeding',
    'benchmarks.overhead',
    'benchmarks.overhead_paired',
    'benchmarks.clone_scaling',
    'benchmarks.shard_snapshots',
    'benchmarks.zoo_ssd_training',
    'benchmarks.zoo_faster_rcnn_training',
])
def test_quick_mode_completes_and_prints_a_ratio(module):
  stdout = run_quick(module)
  assert_figures(stdout)
  _RATIO_CHECKS[module](stdout)


def test_a_ratio_the_wrong_way_round_or_of_the_wrong_pair_fails_the_check():
  rates = {'on': [200.0, 180.0, 150.0], 'off': [220.0, 210.0, 205.0], 'other': [90.0] * 3}
  lines = ['  repeat %d %-28s %10.1f' % (i + 1, name, rates[name][i])
           for i in range(3) for name in rates]
  right = '\n'.join(lines + [bench_util.ratio_line('on/off', rates['on'], rates['off'])])
  quick_testlib.assert_ratio_is(right, 'on/off', rates['on'], rates['off'])
  assert_figures(right)
  swapped = '\n'.join(lines + [bench_util.ratio_line('on/off', rates['off'], rates['on'])])
  wrong_pair = '\n'.join(lines + [bench_util.ratio_line('on/off', rates['on'], rates['other'])])
  for stdout in (swapped, wrong_pair):
    assert_figures(stdout)  # Figures all the same: only the orientation check sees it.
    with pytest.raises(AssertionError):
      quick_testlib.assert_ratio_is(stdout, 'on/off', rates['on'], rates['off'])
  # The checks of the benchmarks' own outputs read the rates from the output itself.
  read = quick_testlib.repeat_rates(right)
  assert read == rates
  with pytest.raises(AssertionError):
    _shard_snapshots_ratios(swapped.replace('on/off', 'on/off steps/sec (4 MB)'))


@pytest.mark.slow
def test_gpu_throughput_quick_runs_fp32_mixed_precision_and_xla():
  stdout = run_quick('benchmarks.gpu_throughput')
  for variant in ('fp32', 'mixed', 'xla'):
    assert re.search(r'^\| %s \| NHWC \| 2 \| [0-9.]+ \| [0-9.]+ \|' % variant, stdout,
                     re.M), stdout[-3000:]
    assert 'ratio slimtrain/raw %s NHWC batch 2 = ' % variant in stdout, stdout[-3000:]
  for variant in ('mixed', 'xla'):
    assert 'ratio raw %s/fp32 NHWC batch 2 [speed-up] = ' % variant in stdout, stdout[-3000:]
  assert 'replicated' in stdout, stdout[-3000:]
  assert_figures(stdout)
  _gpu_throughput_ratios(stdout)


@pytest.mark.slow
def test_overhead_profile_traces_every_graph_variant():
  stdout = run_quick('benchmarks.overhead', '--profile')
  for label in ('(a) trainer.train', '(c) Session loop, BatchQueue', '(b) Estimator.train',
                "(c') Session loop, tf.data"):
    assert label in stdout, stdout[-3000:]
  assert 'op types run per step by (a) beyond (c):' in stdout, stdout[-3000:]
  # (a) checks the loss and the global gradient norm for NaN/Inf every step; the bare loop
  # checks neither.
  assert 'CheckNumerics x2' in stdout, stdout[-3000:]
  assert '(a) numerics checks' in stdout, stdout[-3000:]


@pytest.mark.slow
def test_overhead_splits_the_trainer_gap_into_graph_and_runtime():
  stdout = run_quick('benchmarks.overhead', '--variants=a_nocheck,c_graph,c',
                      '--models=small_cnn')
  assert "(g) Session loop over (a')'s graph" in stdout, stdout[-3000:]
  assert "ratio (a')/(g) [the trainer's runtime" in stdout, stdout[-3000:]
  assert "ratio (g)/(c) [the trainer's graph beyond the bare one]" in stdout, stdout[-3000:]
  assert_figures(stdout)
  _overhead_ratios(stdout)


@pytest.mark.slow
def test_clone_scaling_profile_reports_the_aggregation_time():
  stdout = run_quick('benchmarks.clone_scaling', '--profile')
  assert 'aggregation time per step' in stdout, stdout[-3000:]
  assert '| parameter_server | 2 |' in stdout, stdout[-3000:]


@pytest.mark.parametrize('module', [
    'benchmarks.overhead', 'benchmarks.clone_scaling', 'benchmarks.distributed',
    'benchmarks.gpu_throughput', 'benchmarks.scaling_model'])
def test_help_describes_quick(module):
  result = fork_server.run([sys.executable, '-m', module, '--helpfull'], cwd=REPO_ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=120, check=False, env=quick_testlib.quick_env())
  # absl exits 1 after printing the help, so only the text is checked.
  assert '--quick' in result.stdout, result.stderr[-3000:]


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
