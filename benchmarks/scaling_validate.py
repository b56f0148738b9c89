r"""Calibrate the scaling model on a named set of runs, then validate it on others.

`calibrate` runs only the calibration set, per network (loopback; with
`--netns` also network namespaces): the link probe (bandwidth, round trip,
per-tensor and per-extra-ps-task cost of TF's gRPC runtime), the compute time
per step of N single-process trainers at once for every N the validation set
uses, and 1 worker + 1 ps async (which gives the per-step cost of a
distributed step: its measured step minus the prediction without it). From
these alone it computes the validation set's predictions, checks that they
are distinct from each other and from the calibration clusters', and writes
parameters and predictions to the frozen file (`benchmarks.scaling_params`).

`validate` reads that file, refits nothing, runs each validation
configuration `repeats` times (alternating) and judges each one by the rule
of `bench_util.verdict`: met only when every repeat's measured rate is within
+-20 % of the prediction, missed when none is, otherwise (or with fewer than
bench_util.MIN_REPEATS_TO_RESOLVE repeats) not resolved.

    harness = scaling_validate.Harness(warmup=10, steps=100, timeout=600,
                                       ps_strategy='round_robin')
    scaling_validate.calibrate(path, ['loopback', 'netns'], harness, 5, workload,
                               command, variables)
    scaling_validate.validate(path, harness, 5, workload, variables)
"""

import collections
import sys

from benchmarks import bench_util
from benchmarks import scaling_equations
from benchmarks import scaling_params
from benchmarks.scaling_params import Config

BAND = 0.20         # a repeat agrees when measured / predicted is within 1 +- BAND
TC_MBIT = 200       # the bandwidth-limited link of the validation set
CALIBRATION_CLUSTER = (1, 1, False)   # workers, ps, sync: the per-step cost's cluster

# Outside the calibration set: more than one ps, 2-4 workers, sync and async, both
# networks and a tc-limited link; `calibrate` checks that the predictions are distinct.
# Where the shared cores bind (2+ workers here), the workers cancel out of the rate and
# it depends on M and on R = 2 M (+ 2 sync) round trips only: on each untimed link the
# rows bound there take R = 2, 4 and 6 (1 ps async, 2 ps async, 2 ps sync), never
# 1 ps sync (R = 4 too). One worker is links-bound; the tc rows are all links-bound.
# One worker with 2 ps is sync on the untimed links: async, the first calibration
# (2026-11-27 10:34) predicted it within 0.4 % of the 1 worker + 1 ps calibration
# cluster on both (a second ps costs 94-436 us of a ~20 ms step), so it could not
# count; sync adds two round trips to each step (R = 6). Changed before any validation run.
VALIDATION_SET = (
    Config(1, 2, True, 'loopback'),
    Config(2, 1, False, 'loopback'),
    Config(2, 2, True, 'loopback'),
    Config(3, 2, False, 'loopback'),
    Config(1, 2, True, 'netns'),
    Config(2, 1, False, 'netns'),
    Config(2, 2, False, 'netns'),
    Config(4, 2, True, 'netns'),
    Config(1, 2, False, 'netns', TC_MBIT),
    Config(2, 2, True, 'netns', TC_MBIT),
    Config(3, 2, False, 'netns', TC_MBIT),
    Config(4, 2, True, 'netns', TC_MBIT),
)
# --quick (a smoke run): one row on loopback; with --netns the two namespace rows instead,
# calibrated on namespaces alone (3 clusters; the fitted check's smoke run had 4).
QUICK_VALIDATION_SET = (Config(1, 2, False, 'loopback'),)
QUICK_NETNS_VALIDATION_SET = (Config(1, 2, False, 'netns'), Config(1, 2, False, 'netns', TC_MBIT))

Row = collections.namedtuple('Row', 'config predicted limited_by measured ratios verdict')


class Harness(object):
  """The real measurements, through `benchmarks.scaling_check` (tests pass their own)."""

  def __init__(self, warmup, steps, timeout, ps_strategy):
    self.warmup, self.steps, self.timeout, self.ps_strategy = warmup, steps, timeout, ps_strategy

  def link(self, network):
    """The `scaling_equations.LinkFigures` of `network`."""
    from benchmarks import scaling_check  # noqa: PLC0415
    if network == 'loopback':
      return scaling_check.measure_link()
    return scaling_check.measure_netns_link(self.timeout)

  def compute(self, count):
    """Examples/sec of one of `count` single-process trainers running at once."""
    from benchmarks import scaling_check  # noqa: PLC0415
    return scaling_check.concurrent_compute_rate(count, self.warmup, self.steps, self.timeout)

  def cluster(self, config):
    """Examples/sec of the whole cluster of `config` (a Config)."""
    from benchmarks import scaling_check  # noqa: PLC0415
    return scaling_check.cluster_rate(config.workers, config.ps, config.sync, self.warmup,
                                      self.steps, self.timeout, self.ps_strategy,
                                      use_netns=config.network == 'netns',
                                      tc_mbit=config.tc_mbit)


def validation_set(networks, quick=False):
  """The validation configurations whose networks were all calibrated.

  Args:
    networks: the calibrated networks ('loopback', and 'netns' or not).
    quick: the --quick sets instead of VALIDATION_SET.
  """
  if quick:
    return list(QUICK_NETNS_VALIDATION_SET if 'netns' in networks else QUICK_VALIDATION_SET)
  return [c for c in VALIDATION_SET if c.network in networks]


def calibration_configs(networks):
  """The calibration clusters (1 worker + 1 ps async), one per network."""
  return [Config(*CALIBRATION_CLUSTER, network) for network in networks]


def _calibration_variants(networks, counts, harness, links):
  """Ordered {name: callable} of the calibration set; link figures land in `links`."""
  variants = collections.OrderedDict()
  for network in networks:
    def probe(network=network):
      figures = harness.link(network)
      links.setdefault(network, []).append(list(figures))
      return figures[0] / 1e6  # MB/s, the figure the progress line shows
    variants['link probe, %s (MB/s)' % network] = probe
  for count in counts:
    variants['compute, %d at once' % count] = lambda n=count: harness.compute(n)
  for config in calibration_configs(networks):
    variants[scaling_params.config_name(config)] = lambda c=config: harness.cluster(c)
  return variants


def _median_link(figures):
  """Each figure's median over the probe's repeats, as the file's link dict."""
  return {name: bench_util.median([f[i] for f in figures])
          for i, name in enumerate(scaling_equations.LinkFigures._fields)}


def calibrate(path, networks, harness, repeats, workload, command, variables, quick=False,
              out=sys.stdout):
  """Measures the calibration set, freezes parameters and predictions into `path`.

  Args:
    path: the parameter file to write (atomically).
    networks: 'loopback' and optionally 'netns'.
    harness: a Harness (or a stand-in with link, compute and cluster).
    repeats: repeats of every calibration measurement (medians are used).
    workload: {flag: value} of scaling_params.WORKLOAD_FLAGS, plus 'cores'.
    command: the command line, stored in the file.
    variables: `scaling_equations.model_variables` of workload's net.
    quick: register the quick validation set.
    out: where the progress and tables go.

  Returns:
    the dict written.

  Raises:
    scaling_params.ParamsError: when the validation set's predictions are not
      distinct (nothing is written then).
  """
  configs = validation_set(networks, quick)
  counts = sorted({1} | {c.workers for c in configs})
  links = {}
  machine = scaling_params.machine_description()
  print('calibration set: %s; %d repeats' % (', '.join(
      ['link probe (%s)' % n for n in networks] + ['compute, N = %s trainers at once'
                                                    % '/'.join(map(str, counts))]
      + [scaling_params.config_name(c) for c in calibration_configs(networks)]), repeats),
        file=out, flush=True)
  results = bench_util.repeat_variants(
      _calibration_variants(networks, counts, harness, links), repeats, out=out)
  params = {'model_version': scaling_params.MODEL_VERSION, 'written_utc': scaling_params.now_utc(),
            'command': command, 'machine': machine, 'repeats': repeats, 'quick': quick,
            'workload': {k: workload[k] for k in scaling_params.WORKLOAD_FLAGS},
            'calibration_set': list(results),
            'parameters': _parameters(results, links, counts, networks, workload),
            'measurements': {'links': links, 'rates_examples_per_s': results}}
  predictor = scaling_params.Predictor(params, variables)
  _set_per_step_costs(params, predictor, results, networks)
  params['predictions'] = scaling_params.predictions(predictor, configs)
  _print_parameters(params['parameters'], out)
  _print_predictions(params['predictions'], out)
  _distinct_or_refuse(params['predictions'], scaling_params.predictions(
      predictor, calibration_configs(networks)), quick, out)
  scaling_params.write_params(path, params)
  print('wrote %s (model version %d)' % (path, scaling_params.MODEL_VERSION), file=out,
        flush=True)
  return params


def _parameters(results, links, counts, networks, workload):
  """The file's parameters from the calibration's results, per-step costs still 0."""
  batch = workload['batch_size']
  return {
      'cores': workload['cores'],
      'compute_s': {str(n): batch / bench_util.median(results['compute, %d at once' % n])
                    for n in counts},
      'links': {n: _median_link(links[n]) for n in networks},
      'per_step_s': {n: 0.0 for n in networks},
      'tc_payload_share': scaling_equations.TC_PAYLOAD_SHARE,
  }


def _set_per_step_costs(params, predictor, results, networks):
  """Sets d per network: the calibration cluster's measured step minus its prediction.

  `predictor` reads params, whose per_step_s are still 0, so it predicts the
  step without d. A negative difference (the model already too slow without
  d) is kept under measurements; d is then 0.
  """
  batch = params['workload']['batch_size']
  unclamped = params['measurements']['per_step_unclamped_s'] = {}
  for config in calibration_configs(networks):
    measured_step = batch / bench_util.median(results[scaling_params.config_name(config)])
    unclamped[config.network] = measured_step - predictor.step(config)[0]
  params['parameters']['per_step_s'].update({n: max(0.0, d) for n, d in unclamped.items()})


def _distinct_or_refuse(rows, calibration_rows, quick, out):
  """`scaling_params.check_distinct`; a --quick run (tiny, noisy steps) only prints the clash."""
  try:
    scaling_params.check_distinct(rows, calibration_rows)
  except scaling_params.ParamsError as e:
    if not quick:
      raise
    print('quick run, not refused: %s' % e, file=out, flush=True)


def _print_parameters(parameters, out):
  for network, link in parameters['links'].items():
    print('%s: %.2f GB/s, %.0f us round trip, %.1f us per tensor, %.0f us per extra ps task; '
          'per-step cost %.2f ms; CPU of both ends: %.0f us per round trip, %.1f us per '
          'tensor, %.2f ms per MB' % (
              network, link['bandwidth_bytes_per_s'] / 1e9, link['round_trip_s'] * 1e6,
              link['per_tensor_s'] * 1e6, link['per_extra_ps_s'] * 1e6,
              parameters['per_step_s'][network] * 1e3, link['cpu_round_trip_s'] * 1e6,
              link['cpu_per_tensor_s'] * 1e6, link['cpu_per_byte_s'] * 1e9), file=out)
  print('compute per step, N trainers at once: %s; %d cores' % (', '.join(
      'N=%s %.2f ms' % (n, 1e3 * t) for n, t in sorted(parameters['compute_s'].items())),
                                                               parameters['cores']), file=out)


def _print_predictions(rows, out):
  print('frozen predictions of the validation set:', file=out)
  for row in rows:
    print('  %s: %.1f ex/s (%s)' % (scaling_params.config_name(scaling_params.config_of(row)),
                                    row['examples_per_s'], row['limited_by']), file=out)
  out.flush()


def band_verdict(ratios, band=BAND):
  """'met', 'missed' or 'not resolved' for measured / predicted ratios, one per repeat.

  The rule of `bench_util.verdict` with a two-sided goal: met only when every
  ratio is within 1 +- band, missed only when none is, both only with at
  least bench_util.MIN_REPEATS_TO_RESOLVE repeats.
  """
  inside = [abs(r - 1.0) <= band for r in ratios]
  if len(inside) < bench_util.MIN_REPEATS_TO_RESOLVE:
    return 'not resolved'
  if all(inside):
    return 'met'
  if not any(inside):
    return 'missed'
  return 'not resolved'


def validate(path, harness, repeats, workload, variables, quick=False, out=sys.stdout):
  """Runs the frozen validation set of `path` and judges every configuration.

  Never writes `path` and refits nothing: each prediction is the file's,
  reproduced from the file's parameters.

  Args:
    path: the parameter file (`calibrate`'s).
    harness: a Harness (or a stand-in with a cluster method).
    repeats: runs of every configuration (alternating).
    workload: {flag: value}; must match the file's.
    variables: `scaling_equations.model_variables` of the file's net.
    quick: a --quick run (only these may read a --quick calibration's file).
    out: where the table goes.

  Returns:
    [Row] in the file's order.

  Raises:
    scaling_params.ParamsError: naming `path`, when it is missing, from another
      model version or workload, or its predictions are not reproduced or distinct.
  """
  params = scaling_params.read_params(path)
  if params.get('quick') and not quick:
    raise scaling_params.ParamsError('%s was written by a --quick calibration (a smoke run); '
                                     'calibrate without --quick' % path)
  scaling_params.check_workload(params, workload, path)
  predictor = scaling_params.Predictor(params, variables)
  stored = scaling_params.check_frozen(params, predictor, path)
  networks = sorted({c.network for c in map(scaling_params.config_of, stored)})
  _distinct_or_refuse(stored, scaling_params.predictions(
      predictor, calibration_configs(networks)), params.get('quick', False), out)
  print('validating the frozen predictions of %s (model version %d, calibrated %s by `%s`); '
        '%d repeats; band +-%.0f %%, every repeat' % (
            path, params['model_version'], params['written_utc'], params['command'], repeats,
            100 * BAND), file=out, flush=True)
  configs = [scaling_params.config_of(row) for row in stored]
  results = bench_util.repeat_variants(collections.OrderedDict(
      (scaling_params.config_name(c), lambda c=c: harness.cluster(c)) for c in configs),
                                       repeats, out=out)
  rows = []
  for config, row in zip(configs, stored):
    measured = results[scaling_params.config_name(config)]
    ratios = [m / row['examples_per_s'] for m in measured]
    rows.append(Row(config, row['examples_per_s'], row['limited_by'], measured, ratios,
                    band_verdict(ratios)))
  print_rows(rows, out)
  return rows


def print_rows(rows, out=sys.stdout):
  """The validation table, one row per configuration, and the count lines."""
  print('| workers | ps | mode | network | predicted ex/s | limited by | measured ex/s per '
        'repeat | measured / predicted per repeat | verdict |', file=out)
  print('| ---: | ---: | --- | --- | ---: | --- | --- | --- | --- |', file=out)
  for row in rows:
    c = row.config
    print('| %d | %d | %s | %s%s | %.1f | %s | %s | %s | %s |' % (
        c.workers, c.ps, 'sync' if c.sync else 'async', c.network,
        ' tc %g Mbit' % c.tc_mbit if c.tc_mbit else '', row.predicted, row.limited_by,
        ' '.join('%.1f' % m for m in row.measured), ' '.join('%.3f' % r for r in row.ratios),
        row.verdict), file=out)
  verdicts = [row.verdict for row in rows]
  print('within +-%.0f %%: %d of %d configurations (every repeat)' % (
      100 * BAND, verdicts.count('met'), len(rows)), file=out)
  print('missed: %d; not resolved: %d%s' % (
      verdicts.count('missed'), verdicts.count('not resolved'),
      '' if all(len(r.measured) >= bench_util.MIN_REPEATS_TO_RESOLVE for r in rows)
      else ' (fewer than %d repeats resolve nothing)' % bench_util.MIN_REPEATS_TO_RESOLVE),
        file=out, flush=True)
