r"""A scaling model for parameter-server and all-reduce training, calibrated and validated.

Given how many bytes of variables each ps task holds (placed exactly as
`model_deploy` places them, by `deployment.device_setters.PSDeviceChooser`
with the chosen `ps_strategy`), the compute time of one worker step, and a
link's bandwidth and latency, it predicts steps/sec and scaling efficiency
(compute time / predicted step time) for N workers x M ps and for replicated
all-reduce on one machine (the equations live in `scaling_equations.py`):

  per step a worker pulls every trainable variable (D bytes) and pushes one
  gradient per trainable variable plus the batch-norm statistics (U bytes);
  ps task j serves d_j of the D and u_j of the U bytes, and n_j of the n
  tensors, of every worker; each tensor costs o (an RPC's fixed CPU work).

  async  T = max(t_c + (D + U) / B + n o + 2 L,
                 N * max_j (max(d_j, u_j) / B + n_j o))
         (a worker's own transfers; or ps task j, shared by N workers whose
         transfers interleave, full duplex)
  sync   T = t_c + N * ((max_j u_j + max_j d_j) / B + max_j n_j o) + 4 L
         (SyncReplicasOptimizer: all N push at once, the chief applies, all
         N pull at once; pushing and pulling do not overlap)
  all-reduce on K devices (ring):  T = t_c + 2 (K - 1) / K * G / B + 2 (K - 1) L

  steps/sec (all workers) = N / T,  efficiency = t_c / T.

B is the usable bandwidth (line rate x `--link_efficiency`), L a round-trip
latency, o `--tensor_overhead_us`. Both phases of a worker are counted as not
overlapping compute: TF's ps graphs read variables before the forward pass and
send gradients after the backward pass.

Same machine (model version `scaling_params.MODEL_VERSION`). Real clusters of
this project run every task on this one machine, on loopback or with every
task in its own network namespace (veth links to a bridge). For them a worker
step is the T above plus

  d            the per-step cost of a distributed step that B, L and o miss
               (the master's per-step work, a graph partition run per task);
  (M - 1) p    p the cost of each ps task beyond the first (one more
               partition and its calls per step);

and, because all tasks share the machine's C cores, at least

      N (t_1 + d + (M - 1) p + (D + U) b + n c + R k) / C

with t_1 one trainer's compute alone; b, c and k the CPU seconds that both
ends of a link spend per byte, per tensor and per round trip (the link
probe measures them: the CPU time of the worker and ps processes over a
series of calls; most of a round trip's wall time L is waiting, which
takes no core); R = 2 M round trips (a pull and a push to each ps), 2 more
for sync. A link limited by `tc` (a token bucket of rate r on both veth
ends of every host) enters as B = min(B, r x 1448 / 1514) in the transfers
(the TCP payload share of a 1500-byte-MTU Ethernet frame; the bucket
counts whole frames), not in the shared-cores bound, which counts CPU work.

Calibrate, then validate (`scaling_validate.py`; the file: `scaling_params.py`):

  --calibrate  runs ONLY the calibration set: per network, the link probe
               (B, L, o, p from a step reaching two ps tasks against one
               reaching one ps task with as many tensors, and the CPU
               figures b, c, k: its own microbenchmark, no cluster), the
               compute time per step t_c(N) of N single-process trainers at
               once for every N the
               validation set uses, and 1 worker + 1 ps async (d = its
               measured step minus the prediction without d). It computes the
               validation set's predictions from these alone, refuses when two
               on one link are within 1 % of each other or of that link's
               calibration cluster (identical across links), and freezes
               parameters, predictions, model version, machine, date and
               command into `--params_file` (atomically).
  --validate   reads that file (refusing a missing file, another model
               version, another workload, a file not committed as it is on
               disk, or predictions this code does not reproduce), refits
               nothing, runs the validation set (1w+2ps,
               2w+1ps, 2w+2ps, 3w+2ps, 4w+2ps; sync and async; loopback,
               netns, and netns with every link limited to 200 Mbit by tc)
               `--repeats` times (default 5, alternating) and judges each row
               by bench_util's rule: met only when every repeat is within
               +-20 % of the prediction, missed when none is, else not
               resolved.

The tables (one machine per task on 10-100 Gbit links) do not use the
calibrated file: its figures are this machine's loopback or veth links and
shared cores; the tables print that line.

Tables: ResNet-50 v1 (ImageNet, 1000 classes) and the shapes SSD
(configs/ssd_shapes.config) at 8/32/128 workers on 10/25/100 Gbit links, and
the smallest ps count that keeps a worker's step below 110 % of its compute.

    python -m benchmarks.scaling_model --quick     # smoke: tables, calibrate + validate (temp file)
    python -m benchmarks.scaling_model             # tables only
    python -m benchmarks.scaling_model --calibrate --netns   # writes benchmarks/scaling_params.json
    python -m benchmarks.scaling_model --validate            # reads it; 5 repeats
    python -m benchmarks.scaling_model --resnet_compute_ms=120 --link_gbps=25

The model is first order: no stragglers, no ps-side compute, no
compute/communication overlap, no TCP slow start; sizes are float32 unless the
variables say otherwise.
"""

import os
import sys
import tempfile

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf

from benchmarks import distributed  # its flags: quick, role, cluster, task, sync, net, ...
from benchmarks import scaling_check
from benchmarks import scaling_params
from benchmarks.scaling_equations import Shards  # noqa: F401  (the model's names, here too)
from benchmarks.scaling_equations import model_variables
from benchmarks.scaling_equations import net_variables
from benchmarks.scaling_equations import predict_allreduce
from benchmarks.scaling_equations import predict_ps
from benchmarks.scaling_equations import shard_traffic
from benchmarks.scaling_equations import shared_cores_step  # noqa: F401

flags.DEFINE_bool('calibrate', False, 'Run the calibration set only (link probes, compute of '
                  'N trainers at once, 1 worker + 1 ps async per network) and freeze every '
                  'parameter and the validation predictions into --params_file; with --netns '
                  'also across network namespaces (needs root, `ip` and `tc`).')
flags.DEFINE_bool('validate', False, 'Run the validation set frozen in --params_file (never '
                  'writes it) and judge every configuration over --repeats repeats.')
flags.DEFINE_string('params_file', None, 'The frozen parameter file; default '
                    'benchmarks/scaling_params.json (with --quick: a temporary file).')
flags.DEFINE_list('link_gbps', ['10', '25', '100'], 'Link line rates of the tables (Gbit/s).')
flags.DEFINE_list('table_workers', ['8', '32', '128'], 'Worker counts of the tables.')
flags.DEFINE_list('table_ps', ['1', '2', '4', '8', '16', '32'], 'ps counts of the tables.')
flags.DEFINE_float('link_efficiency', 0.8, 'Share of the line rate gRPC reaches (tables).')
flags.DEFINE_float('latency_us', 50.0, 'Round-trip latency of the tables (microseconds).')
flags.DEFINE_float('tensor_overhead_us', 20.0, 'Fixed cost of moving one tensor between '
                   'tasks in the tables (microseconds; --calibrate measures this machine\'s).')
flags.DEFINE_float('resnet_compute_ms', 173.0,
                   'ResNet-50 compute time per worker step: default = batch 64 fp32 at '
                   '~370 img/s (a V100-class GPU, tf_cnn_benchmarks); set your own.')
flags.DEFINE_float('ssd_compute_ms', 50.0, 'shapes SSD compute time per worker step.')
flags.DEFINE_float('allreduce_gbps', 100.0, 'Device-to-device bandwidth of the one-machine '
                   'all-reduce table (Gbit/s, e.g. PCIe 4 x16 ~ 200, NVLink ~ 2400).')
flags.DEFINE_enum('ps_strategy', 'round_robin', ['round_robin', 'greedy'],
                  'How variables are spread over the ps tasks (as model_deploy).')
FLAGS = flags.FLAGS
FLAGS.set_default('repeats', 5)

STEP_BUDGET = 1.10  # a worker's step may take at most 110 % of its compute


def _gbit(gbps):
  return float(gbps) * 1e9 / 8.0


TABLES_NOT_CALIBRATED = (
    'tables: assumed link figures (--link_efficiency, --latency_us, --tensor_overhead_us), '
    'not the calibrated %s: that file describes this machine (every task on it, loopback or '
    'veth links, shared cores, its per-step CPU costs), the tables one machine per task on '
    '10-100 Gbit links')


def print_tables(name, variables, compute_s, out=sys.stdout):
  """Prints the N x M tables, the all-reduce line and the ps count for <= 110 %."""
  links = [float(g) for g in FLAGS.link_gbps]
  workers_list = [int(w) for w in FLAGS.table_workers]
  ps_list = [int(p) for p in FLAGS.table_ps]
  shards = {m: shard_traffic(variables, m, FLAGS.ps_strategy) for m in ps_list}
  total = shards[ps_list[0]]
  latency = FLAGS.latency_us * 1e-6
  print('\n%s: %.1f MB pulled + %.1f MB pushed in %d tensors per worker step; compute '
        '%.1f ms/step; links at %.0f %% of line rate, %.0f us round trip, %.0f us per tensor; '
        'ps_strategy %s' % (name, total.total_down / 1e6, total.total_up / 1e6,
                            sum(total.tensors), 1e3 * compute_s, 100 * FLAGS.link_efficiency,
                            FLAGS.latency_us, FLAGS.tensor_overhead_us, FLAGS.ps_strategy),
        file=out)
  print('largest ps task holds (MB) for M = %s: %s' % (
      '/'.join(str(m) for m in ps_list),
      ' / '.join('%.1f' % (max(shards[m].up) / 1e6) for m in ps_list)), file=out)
  print('| link Gbit/s | workers | mode | ' + ' | '.join('eff. M=%d' % m for m in ps_list)
        + ' | smallest M with step <= 110 % of compute |', file=out)
  print('| ---: | ---: | --- |' + ' ---: |' * len(ps_list) + ' --- |', file=out)
  for gbps in links:
    bandwidth = _gbit(gbps) * FLAGS.link_efficiency
    for workers in workers_list:
      for sync in (False, True):
        steps = {m: predict_ps(shards[m], compute_s, workers, bandwidth, latency, sync,
                               FLAGS.tensor_overhead_us * 1e-6) for m in ps_list}
        enough = [m for m in ps_list if steps[m] <= STEP_BUDGET * compute_s]
        print('| %g | %d | %s | %s | %s |' % (
            gbps, workers, 'sync' if sync else 'async',
            ' | '.join('%.2f' % (compute_s / steps[m]) for m in ps_list),
            ('M = %d (%.0f steps/s in all)' % (enough[0], workers / steps[enough[0]])
             if enough else 'none up to M = %d' % ps_list[-1])), file=out)
  gradient_bytes = sum(size for _, size, trainable in variables if trainable)
  bandwidth = _gbit(FLAGS.allreduce_gbps)
  print('replicated all-reduce on one machine (%g Gbit/s between devices): efficiency %s'
        % (FLAGS.allreduce_gbps, ', '.join(
            '%d devices %.2f' % (k, compute_s / predict_allreduce(
                gradient_bytes, compute_s, k, bandwidth, latency)) for k in (2, 4, 8))),
        file=out)
  out.flush()


def resnet_variables():
  from models import slim_classifier  # noqa: PLC0415

  def build():
    model = slim_classifier.SlimClassifier(True, 1000, net='resnet_v1_50', image_height=224,
                                           image_width=224)
    images = tf.zeros([1, 224, 224, 3])
    model.predict(*model.preprocess(images))
  return model_variables(build)


def ssd_variables():
  from builders import model_builder  # noqa: PLC0415
  from core import config_util  # noqa: PLC0415
  path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      'configs', 'ssd_shapes.config')
  model_config = config_util.get_configs_from_pipeline_file(path)['model']

  def build():
    model = model_builder.build(model_config, is_training=True)
    resizer = model_config.ssd.image_resizer.fixed_shape_resizer
    images = tf.zeros([1, resizer.height, resizer.width, 3])
    model.predict(*model.preprocess(images))
  return model_variables(build)


def _workload():
  """{flag: value} of scaling_params.WORKLOAD_FLAGS, plus this machine's cores."""
  workload = {name: FLAGS[name].value for name in scaling_params.WORKLOAD_FLAGS}
  workload['cores'] = os.cpu_count() or 1
  return workload


def _check_settings():
  """Raises app.UsageError for settings a calibration or validation cannot use."""
  if FLAGS.quick:
    return
  if FLAGS.warmup < 10 or FLAGS.steps < 100:
    raise app.UsageError('--calibrate/--validate need --warmup >= 10 and --steps >= 100 '
                         '(got --warmup=%d --steps=%d)' % (FLAGS.warmup, FLAGS.steps))
  from benchmarks import bench_util  # noqa: PLC0415
  if FLAGS.validate and FLAGS.repeats < bench_util.MIN_REPEATS_TO_RESOLVE:
    raise app.UsageError('--repeats=%d: a validation needs >= %d repeats to resolve anything'
                         % (FLAGS.repeats, bench_util.MIN_REPEATS_TO_RESOLVE))


def _check_netns(reason_for):
  """Raises app.UsageError naming `reason_for` where namespaces or tc are unavailable."""
  import shutil  # noqa: PLC0415
  from deployment import netns  # noqa: PLC0415
  reason = netns.unavailable_reason() or (
      None if shutil.which('tc') else "iproute2's `tc` is not on PATH")
  if reason:
    raise app.UsageError('%s: %s' % (reason_for, reason))


def calibrate_and_validate(path, quick):
  """Runs --calibrate and/or --validate (both with --quick and neither named)."""
  from benchmarks import scaling_validate  # noqa: PLC0415
  calibrate = FLAGS.calibrate or (quick and not FLAGS.validate)
  validate = FLAGS.validate or (quick and not FLAGS.calibrate)
  if calibrate and validate and not quick:
    raise app.UsageError('--calibrate and --validate together only with --quick: commit the '
                         'calibration file, then run --validate')
  _check_settings()
  harness = scaling_validate.Harness(FLAGS.warmup, FLAGS.steps, FLAGS.timeout, FLAGS.ps_strategy)
  variables = net_variables(FLAGS.net, FLAGS.image_size, distributed.NUM_CLASSES)
  try:
    if calibrate:
      # A --quick --netns run validates namespace rows only: it calibrates no loopback.
      networks = (['netns'] if quick else ['loopback', 'netns']) if FLAGS.netns else ['loopback']
      if FLAGS.netns:
        _check_netns('--netns')
      scaling_validate.calibrate(path, networks, harness, FLAGS.repeats, _workload(),
                                 ' '.join(['python -m benchmarks.scaling_model'] + sys.argv[1:]),
                                 variables, quick=quick)
    if validate:
      params = scaling_params.read_params(path)
      if not quick:
        revision = scaling_params.committed_revision(path)
        print('%s: %s' % (path, 'committed in %s' % revision if revision
                          else 'git cannot say whether it is committed'))
      if any(row['network'] == 'netns' for row in params.get('predictions', [])):
        _check_netns('%s holds netns configurations' % path)
      scaling_validate.validate(path, harness, FLAGS.repeats, _workload(), variables,
                                quick=quick)
  except scaling_params.ParamsError as e:
    sys.exit('scaling_model: %s' % e)


def main(argv):
  del argv
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  logging.set_verbosity(logging.WARNING)
  tf.get_logger().setLevel('ERROR')
  tf.compat.v1.disable_eager_execution()
  if scaling_check.run_task(FLAGS.ps_strategy):
    return
  path = FLAGS.params_file
  if FLAGS.quick:
    FLAGS.warmup, FLAGS.steps, FLAGS.repeats = 3, 20, 1
    FLAGS.image_size, FLAGS.batch_size = 16, 8
    FLAGS.link_gbps, FLAGS.table_workers, FLAGS.table_ps = ['10'], ['8'], ['1', '2']
  print(TABLES_NOT_CALIBRATED % (path or scaling_params.DEFAULT_PATH))
  print_tables('ResNet-50 v1 (1000 classes)', resnet_variables(),
               FLAGS.resnet_compute_ms / 1e3)
  print_tables('shapes SSD (configs/ssd_shapes.config)', ssd_variables(),
               FLAGS.ssd_compute_ms / 1e3)
  if not (FLAGS.quick or FLAGS.calibrate or FLAGS.validate):
    return
  if FLAGS.quick and path is None:
    with tempfile.TemporaryDirectory() as folder:
      calibrate_and_validate(os.path.join(folder, 'scaling_params.json'), quick=True)
  else:
    calibrate_and_validate(path or scaling_params.DEFAULT_PATH, quick=FLAGS.quick)


if __name__ == '__main__':
  app.run(main)
