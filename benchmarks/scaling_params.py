r"""The frozen parameter file of the scaling model's same-machine form.

`benchmarks.scaling_model --calibrate` measures the calibration set and writes
every parameter the same-machine prediction needs, with the validation set's
predictions computed from them, into one JSON file (default
`benchmarks/scaling_params.json`, written atomically); `--validate` reads it
and never writes it. A file written by another MODEL_VERSION, or whose
stored predictions this code no longer reproduces, is refused: the model and
its parameters are fixed before any validation configuration runs.

The file (JSON object):

    model_version    MODEL_VERSION of the code that wrote it
    written_utc      when, ISO 8601
    command          the command line of the calibration run
    machine          cores, CPU model, platform, Python and TensorFlow versions,
                     load average before the run
    workload         net, image_size, batch_size, threads, ps_strategy, warmup,
                     steps (validation must use the same; WORKLOAD_FLAGS)
    calibration_set  names of what was measured, e.g. "1 worker + 1 ps, async, netns"
    repeats          repeats of the calibration run
    quick            true for a --quick (smoke) calibration, which only --quick validates
    parameters       cores; compute_s {"N": s per step of N trainers at once};
                     links {network: {the fields of scaling_equations.LinkFigures}};
                     per_step_s {network: s};
                     tc_payload_share
    measurements     every repeat's raw figure behind the parameters
    predictions      the validation set: [{workers, ps, sync, network, tc_mbit,
                     examples_per_s, limited_by}]

    params = scaling_params.read_params(path)         # ParamsError if unusable
    predictor = scaling_params.Predictor(params, variables)
    rate, limit = predictor.rate(Config(2, 2, True, 'netns', 200))
"""

import collections
import datetime
import json
import os
import platform
import sys
import tempfile

from benchmarks import scaling_equations

# Bump whenever a prediction this module computes from the same parameters changes.
# 1-2: the in-run fitted checks of 2026-11-24/25 (no file).
# 3: links + per-step cost + per-extra-ps-task cost + shared cores; tc as wire bandwidth.
# 4: the shared-cores floor counts the CPU seconds the link probe measures at both ends
#    (per round trip, tensor and byte), no longer twice the wall time of each transfer.
MODEL_VERSION = 4
DEFAULT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'scaling_params.json')
# Flags that describe the workload; validation refuses values other than the calibration's.
WORKLOAD_FLAGS = ('net', 'image_size', 'batch_size', 'threads', 'ps_strategy', 'warmup', 'steps')
# Two predictions closer than this (relative) count as the same prediction.
DISTINCT = 0.01
# Stored and recomputed predictions may differ by float rounding only.
_SAME_PREDICTION = 1e-9


class ParamsError(Exception):
  """The parameter file is missing, unreadable, from another model, or does not fit."""


Config = collections.namedtuple('Config', 'workers ps sync network tc_mbit')
Config.__new__.__defaults__ = (0,)


def config_name(config):
  """A configuration's label, e.g. '2 workers + 2 ps, sync, netns, tc 200 Mbit'."""
  return '%d worker%s + %d ps, %s, %s%s' % (
      config.workers, 's' if config.workers > 1 else '', config.ps,
      'sync' if config.sync else 'async', config.network,
      ', tc %g Mbit' % config.tc_mbit if config.tc_mbit else '')


def machine_description():
  """Cores, CPU model, platform, Python and TensorFlow versions, load average now."""
  import tensorflow as tf  # noqa: PLC0415
  cpu = platform.processor() or ''
  try:
    with open('/proc/cpuinfo', encoding='utf-8') as f:
      cpu = next((line.split(':', 1)[1].strip() for line in f
                  if line.startswith('model name')), cpu)
  except OSError:
    pass
  return {'cores': os.cpu_count() or 1, 'cpu': cpu, 'platform': platform.platform(),
          'python': sys.version.split()[0], 'tensorflow': tf.__version__,
          'load_average': list(os.getloadavg()) if hasattr(os, 'getloadavg') else None}


def now_utc():
  return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def write_params(path, params):
  """Writes `params` to `path` atomically (a temporary file in the same folder, renamed).

  Args:
    path: the parameter file.
    params: a JSON-serialisable dict.
  """
  folder = os.path.dirname(os.path.abspath(path))
  fd, temporary = tempfile.mkstemp(prefix='.scaling_params.', suffix='.tmp', dir=folder)
  try:
    with os.fdopen(fd, 'w', encoding='utf-8') as f:
      json.dump(params, f, indent=1, sort_keys=True)
      f.write('\n')
      f.flush()
      os.fsync(f.fileno())
    os.replace(temporary, path)
  except BaseException:
    if os.path.exists(temporary):
      os.unlink(temporary)
    raise


def read_params(path):
  """The parameter file's dict, checked to be this model's.

  Raises:
    ParamsError: naming `path`, when it is missing, not JSON, or written by
      another MODEL_VERSION.
  """
  if not os.path.exists(path):
    raise ParamsError('%s does not exist: run `python -m benchmarks.scaling_model --calibrate '
                      '--params_file=%s` first (on a quiet machine)' % (path, path))
  try:
    with open(path, encoding='utf-8') as f:
      params = json.load(f)
  except (OSError, ValueError) as e:
    raise ParamsError('%s cannot be read as JSON: %s' % (path, e)) from e
  version = params.get('model_version') if isinstance(params, dict) else None
  if version != MODEL_VERSION:
    raise ParamsError('%s was written by model version %r; this code is model version %d: '
                      'calibrate again with --calibrate' % (path, version, MODEL_VERSION))
  return params


def committed_revision(path):
  """The commit that last changed `path`, checked to hold exactly what is on disk.

  Returns:
    the short commit hash, or None where git cannot say (no git, not a repository).

  Raises:
    ParamsError: naming `path`, when git tracks nothing of it or it differs
      from the committed version (a validation must run on a committed file).
  """
  import subprocess  # noqa: PLC0415
  folder, name = os.path.split(os.path.abspath(path))

  def git(*args):
    return subprocess.run(['git', '-C', folder] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=30, check=False)
  try:
    if git('rev-parse', '--is-inside-work-tree').returncode:
      return None
    tracked = git('ls-files', '--error-unmatch', '--', name).returncode == 0
    changed = git('diff', '--quiet', 'HEAD', '--', name).returncode != 0
    revision = git('log', '-1', '--format=%h', '--', name).stdout.strip()
  except (OSError, subprocess.TimeoutExpired):
    return None
  if not tracked or changed or not revision:
    raise ParamsError('%s is not committed as it is on disk: commit the calibration before '
                      'validating (the predictions must be fixed before the run)' % path)
  return revision


def check_workload(params, workload, path):
  """Raises ParamsError naming the first flag whose value differs from the calibration's.

  Args:
    params: the file's dict.
    workload: {flag name: value} of this run (WORKLOAD_FLAGS).
    path: the file (for the message).
  """
  calibrated = params.get('workload', {})
  for name in WORKLOAD_FLAGS:
    if calibrated.get(name) != workload.get(name):
      raise ParamsError('--%s=%s differs from the calibration\'s %s=%r in %s; use its value '
                        'or calibrate again' % (name, workload.get(name), name,
                                                calibrated.get(name), path))
  cores = params['parameters']['cores']
  if workload.get('cores', cores) != cores:
    raise ParamsError('%s was calibrated on %d cores, this machine has %d' % (
        path, cores, workload['cores']))


class Predictor(object):
  """Predicted examples/sec of a configuration from a parameter file's figures only."""

  def __init__(self, params, variables):
    """Args: params: the file's dict; variables: `scaling_equations.model_variables` of the net."""
    self._parameters = params['parameters']
    self._batch = params['workload']['batch_size']
    self._strategy = params['workload']['ps_strategy']
    self._variables = variables

  def step(self, config):
    """(seconds per worker step, bound that set it) of `config` (a Config).

    Raises:
      ParamsError: when the file has no figures for the config's network or worker count.
    """
    p = self._parameters
    compute = p['compute_s'].get(str(config.workers))
    link = p['links'].get(config.network)
    if compute is None or link is None or config.network not in p['per_step_s']:
      raise ParamsError('the calibration has no %s for %s' % (
          'compute time of %d trainers' % config.workers if compute is None
          else 'link figures of network %r' % config.network, config_name(config)))
    wire = (scaling_equations.tc_bandwidth(config.tc_mbit, p['tc_payload_share'])
            if config.tc_mbit else None)
    shards = scaling_equations.shard_traffic(self._variables, config.ps, self._strategy)
    return scaling_equations.same_machine_step(
        shards, compute, p['compute_s']['1'], config.workers,
        scaling_equations.LinkFigures(**link), p['per_step_s'][config.network], config.sync,
        p['cores'],
        wire_bandwidth=wire)

  def rate(self, config):
    """(examples/sec of the whole cluster, bound that set it) of `config`."""
    step, limit = self.step(config)
    return config.workers * self._batch / step, limit


def predictions(predictor, configs):
  """[{workers, ps, sync, network, tc_mbit, examples_per_s, limited_by}] of `configs`."""
  rows = []
  for config in configs:
    rate, limit = predictor.rate(config)
    rows.append(dict(config._asdict(), examples_per_s=rate, limited_by=limit))
  return rows


def config_of(row):
  """The Config of a predictions row."""
  return Config(*(row[k] for k in Config._fields))


def check_distinct(rows, others=(), tolerance=DISTINCT):
  """Raises ParamsError when two predictions coincide.

  On one link (network and tc limit) every prediction shares the same
  measured inputs, so two within `tolerance` of each other would test the
  same thing twice; a validation row must also stay that far from its link's
  calibration cluster. Across links only an identical prediction (which only
  the same equations on the same inputs give) is refused.

  Args:
    rows: predictions rows (the validation set).
    others: further rows no validation row may equal (the calibration clusters).
    tolerance: relative difference below which two predictions on one link count as one.
  """
  rows, others = list(rows), list(others)
  clashes = []
  for i, row in enumerate(rows):
    for other in rows[i + 1:] + others:
      same_link = (row['network'], row['tc_mbit']) == (other['network'], other['tc_mbit'])
      a, b = row['examples_per_s'], other['examples_per_s']
      if abs(a - b) <= (tolerance if same_link else _SAME_PREDICTION) * max(a, b):
        clashes.append('%s (%.1f) and %s (%.1f)' % (config_name(config_of(row)), a,
                                                    config_name(config_of(other)), b))
  if clashes:
    raise ParamsError('validation configurations must have distinct predictions (more than '
                      '%g %% apart on one link); these are not: %s' % (100 * tolerance,
                                                                     '; '.join(clashes)))


def check_frozen(params, predictor, path):
  """The file's stored predictions, checked against what this code computes from its figures.

  Returns:
    the stored predictions rows.

  Raises:
    ParamsError: naming `path`, when a stored prediction is not reproduced
      (the model changed without a MODEL_VERSION bump) or there are none.
  """
  stored = params.get('predictions') or []
  if not stored:
    raise ParamsError('%s holds no validation predictions; calibrate again' % path)
  for row in stored:
    rate, limit = predictor.rate(config_of(row))
    if (abs(rate - row['examples_per_s']) > _SAME_PREDICTION * rate
        or limit != row['limited_by']):
      raise ParamsError('%s predicts %.3f ex/s (%s) for %s; this code computes %.3f (%s) from '
                        'the same parameters: the model changed without a MODEL_VERSION bump' % (
                            path, row['examples_per_s'], row['limited_by'],
                            config_name(config_of(row)), rate, limit))
  return stored
