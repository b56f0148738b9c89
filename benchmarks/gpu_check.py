r"""The GPU check: one command, at most 9 minutes, everything in one folder.

slimtrain's claims about GPUs (clones on GPUs, mixed precision, XLA, a
trainer as fast as a bare loop) are checked by this one command, prepared in
advance so that the few minutes of a lent GPU machine go to measuring:

    benchmarks/gpu_check.sh --output_dir=$OUT                # on the GPU machine
    benchmarks/gpu_check.sh --dry-run --output_dir=out/gpu_check_dry   # any CPU, tiny
    python -m benchmarks.gpu_check --steps=gpu_tests,multi_clone      # a subset

It writes into `--output_dir`: `gpu_check.json` (every figure),
`gpu_check.md` (the summary: per step its status, seconds and figures) and
`<step>.log` per step (`--bundle=x.tar.gz` packs the folder into one file).
Each step runs in its own process under its own time budget; a step that
fails, crashes or runs out of time is recorded and the next one starts, so no
step eats the others' minutes. The steps (numbers as
in the issue that asked for them):

  env              TensorFlow's build, the GPUs it sees, `nvidia-smi`'s name.
  1 gpu_tests      pytest: the tests marked `gpu` (they skip without a GPU;
                   tests/deployment/gpu_equivalence_main.py carves the 4
                   logical GPUs it needs from GPU 0 itself), then the tests
                   whose expectations follow the visible GPU count.
  3 multi_clone    2 clones on 2 logical GPUs of GPU 0, the demo's SSD, 200
                   steps, parameter_server and replicated (all-reduce).
  4 mixed_precision loss scaling on, an inf-gradient step skipped, final loss
                   within 10 % of fp32.
  5 input_pipeline does the BatchQueue keep up at batch 128 (step-time gap,
                   `nvidia-smi` idle fraction).
  2 throughput     ResNet-50 v1 224x224 synthetic (benchmarks.gpu_throughput
                   --paired): fp32 / mixed / xla / mixed_xla, NHWC and NCHW,
                   batch 128 then 64, trainer vs bare loop alternating in one
                   session, 5 repeats. Runs last and gets the minutes left
                   (`--total_budget_s` minus what the others used); cells that
                   no longer fit are listed as skipped.

On a fresh machine, where the driver compiles TensorFlow's kernels from PTX,
steps env to 5 took about 7 minutes (H200, 2026-11-28), so the throughput
grid needs runs of its own: `--steps=env,throughput` with the cells split by
`--throughput_variants` (each cell is one XLA compile or more). Every step's
budget can be changed with `--step_budget_s=STEP=SECONDS`; 8 s before its
budget ends a step prints every thread's stack, so a killed step says where
it was.

Steps 3-5 are benchmarks.gpu_check_steps; 2 is benchmarks.gpu_throughput.
`--dry-run` runs every step on the CPU with tiny sizes (2 virtual CPU devices
instead of 2 logical GPUs, small_resnet 32x32 instead of ResNet-50; the `gpu`
tests skip), as tests/benchmarks/test_gpu_check.py does, so the command
cannot rot between GPU loans.

This module imports no TensorFlow: the check still writes its summary when
TensorFlow is missing or cannot load its CUDA libraries (the env step then
says why, and the GPU steps are skipped rather than run on a CPU).
`--install_cuda` first runs the one install the README asks of GPU users,
`pip install 'tensorflow[and-cuda]==2.21.*'`, with this Python (it needs the
package index; it is not counted in the 9 minutes).
"""

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ElementTree

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CUDA_INSTALL = 'tensorflow[and-cuda]==2.21.*'
TOTAL_BUDGET_S = 540  # 9 minutes, all steps.
MARGIN_S = 15  # Kept back for the summary and for killing a late step.
STACKS_BEFORE_BUDGET_S = 8  # A step dumps its threads' stacks this long before its kill.
A100_AMP_XLA_ANCHOR = 2375.0  # NVIDIA's TF1 ResNet-50, one A100, AMP+XLA, img/s.
TRAINER_OVER_RAW_GOAL = 0.98
CUDA_CACHE_PATH = '/tmp/slimtrain_gpu_check_cuda_cache'  # Not under $OUT: it stays there.

# (name, issue number, title, budget on the GPU, budget of --dry-run); run in this order.
# GPU budgets from the lent H200 runs (benchmarks/RESULTS.md, "GPU check"): env took
# 16-18 s, the GPU tests 66 s, multi-clone 110 s (both modes), mixed precision 114 s
# (its first fp16 step 40 s: kernels compiled from PTX), the input pipeline 134 s (its
# first batch-128 step 30-37 s). Each is that plus about a third.
STEPS = (
    ('env', None, 'environment', 45, 180),
    ('gpu_tests', 1, 'GPU tests', 90, 300),
    ('multi_clone', 3, 'multi-clone on 2 logical GPUs', 150, 420),
    ('mixed_precision', 4, 'mixed precision correctness', 150, 300),
    ('input_pipeline', 5, 'input pipeline at batch 128', 180, 240),
    ('throughput', 2, 'ResNet-50 throughput', None, 600),
)
STEP_NAMES = tuple(step[0] for step in STEPS)

GPU_TEST_RUNS = (
    # (label, pytest arguments, dry-run pytest arguments)
    ('marked gpu', ['-m', 'gpu', 'tests/deployment/test_gpu_equivalence.py'],
     ['-m', 'gpu', 'tests/deployment/test_gpu_equivalence.py']),
    # The tests whose expectations follow the number of visible GPUs.
    ('GPU count and all-reduce choice with the GPU visible',
     ['tests/trainer/test_trainer.py', 'tests/deployment/test_replicated.py', '-k',
      'num_clones_minus_one or more_clones_than_gpus or all_reduce or nccl'],
     ['tests/deployment/test_replicated.py', '-k', 'all_reduce_choice']),
)


def parse_args(argv):
  parser = argparse.ArgumentParser(
      description='The GPU check (see the module docstring of benchmarks/gpu_check.py).')
  parser.add_argument('--output_dir', '--output-dir',
                      default=os.environ.get('OUT') or os.path.join('out', 'gpu_check'),
                      help='Where the JSON, the Markdown and the logs go (default: $OUT, '
                           'else out/gpu_check).')
  parser.add_argument('--dry_run', '--dry-run', action='store_true',
                      help='Tiny sizes on the CPU, every step on the same code paths.')
  parser.add_argument('--steps', default=','.join(STEP_NAMES),
                      help='Comma-separated steps to run (default: all of %s).'
                      % ', '.join(STEP_NAMES))
  parser.add_argument('--total_budget_s', '--total-budget-s', type=float, default=None,
                      help='Seconds for all steps (default %d; --dry-run: no limit beyond '
                           'the steps\' own).' % TOTAL_BUDGET_S)
  parser.add_argument('--throughput_variants', default='fp32,mixed,xla,mixed_xla',
                      help='Step 2\'s variants, in the order measured (a short budget '
                           'cuts the last ones).')
  parser.add_argument('--step_budget_s', '--step-budget-s', action='append', default=[],
                      metavar='STEP=SECONDS',
                      help='A step\'s own budget on the GPU instead of its default (repeatable; '
                           'the total budget still caps it).')
  parser.add_argument('--install_cuda', '--install-cuda', action='store_true',
                      help="First pip install '%s' into this Python." % CUDA_INSTALL)
  parser.add_argument('--bundle', default=None,
                      help='Also pack the whole output folder into this .tar.gz (one file '
                           'to fetch from a machine that returns few files).')
  parser.add_argument('--python', default=sys.executable,
                      help='The Python that runs the steps (default: this one).')
  args = parser.parse_args(argv)
  # The steps run in the repository root; paths given are the caller's.
  args.output_dir = os.path.abspath(args.output_dir)
  args.bundle = args.bundle and os.path.abspath(args.bundle)
  args.steps = [s.strip() for s in args.steps.split(',') if s.strip()]
  unknown = sorted(set(args.steps) - set(STEP_NAMES))
  if unknown:
    parser.error('--steps: unknown %s (known: %s)' % (', '.join(unknown), ', '.join(STEP_NAMES)))
  budgets = {}
  for item in args.step_budget_s:
    name, _, seconds = item.partition('=')
    try:
      budgets[name] = float(seconds)
    except ValueError:
      parser.error('--step_budget_s=%s: want STEP=SECONDS' % item)
    if name not in STEP_NAMES or budgets[name] <= 0:
      parser.error('--step_budget_s=%s: want one of %s and seconds > 0'
                   % (item, ', '.join(STEP_NAMES)))
  args.step_budget_s = budgets
  return args


def step_env(dry_run):
  """The environment of every step's process."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONUNBUFFERED='1')
  env['PYTHONPATH'] = os.pathsep.join([REPO_ROOT] + [p for p in [os.environ.get('PYTHONPATH')]
                                                     if p])
  if dry_run:
    env['CUDA_VISIBLE_DEVICES'] = ''
  else:
    # TF 2.21's wheel carries sm_90 kernels only as PTX (compute_90): the driver
    # compiles each on first use. One cache, large enough, shared by every step's
    # process, so only the first step pays for that.
    env.setdefault('CUDA_CACHE_MAXSIZE', str(4 * 1024 ** 3))
    env.setdefault('CUDA_CACHE_PATH', CUDA_CACHE_PATH)
  return env


def run_process(command, log_path, timeout_s, env):
  """Runs `command` (appending to `log_path`) for at most `timeout_s` seconds.

  The command runs in its own process group, which is killed whole on timeout,
  so the test subprocesses of pytest die with it.

  Returns:
    (return code or None on timeout, seconds).
  """
  started = time.perf_counter()
  with open(log_path, 'a') as log:
    log.write('$ %s\n' % ' '.join(command))
    log.flush()
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
      code = process.wait(timeout=max(1.0, timeout_s))
    except subprocess.TimeoutExpired:
      code = None
      for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
          os.killpg(process.pid, sig)
        except ProcessLookupError:
          break
        try:
          process.wait(timeout=grace)
          break
        except subprocess.TimeoutExpired:
          continue
      log.write('\n[gpu_check] killed after %.0f s (budget)\n' % timeout_s)
  return code, time.perf_counter() - started


def junit_counts(xml_path):
  """{'tests', 'failures', 'errors', 'skipped', 'skip_reasons', 'failed'} of a junit XML."""
  counts = {'tests': 0, 'failures': 0, 'errors': 0, 'skipped': 0, 'skip_reasons': [],
            'failed': []}
  if not os.path.exists(xml_path):
    return counts
  root = ElementTree.parse(xml_path).getroot()
  for suite in ([root] if root.tag == 'testsuite' else root.findall('testsuite')):
    for key in ('tests', 'failures', 'errors', 'skipped'):
      counts[key] += int(suite.get(key, 0))
    for case in suite.iter('testcase'):
      name = '%s::%s' % (case.get('classname'), case.get('name'))
      for skipped in case.findall('skipped'):
        counts['skip_reasons'].append('%s: %s' % (name, skipped.get('message', '')))
      if case.find('failure') is not None or case.find('error') is not None:
        counts['failed'].append(name)
  return counts


def run_gpu_tests(args, budget_s, log_path):
  """Step 1: the pytest runs of GPU_TEST_RUNS, each with a junit XML."""
  deadline = time.perf_counter() + budget_s
  figures, ok, timed_out = {}, True, False
  for index, (label, pytest_args, dry_args) in enumerate(GPU_TEST_RUNS):
    xml_path = os.path.join(args.output_dir, 'gpu_tests_%d.xml' % index)
    command = [args.python, '-m', 'pytest', '-q', '-rs', '-p', 'no:cacheprovider',
               '--junitxml=%s' % xml_path] + (dry_args if args.dry_run else pytest_args)
    code, seconds = run_process(command, log_path, deadline - time.perf_counter(),
                                step_env(args.dry_run))
    counts = junit_counts(xml_path)
    counts.update(returncode=code, seconds=seconds)
    figures[label] = counts
    timed_out = timed_out or code is None
    # pytest exits 5 when every selected test was deselected: nothing ran.
    ok = ok and code == 0 and not counts['failures'] and not counts['errors']
    if not args.dry_run and counts['skipped']:
      ok = False  # On the GPU machine a skipped GPU test is a test that did not run.
  notes = ('pass: every run exits 0 with no failure%s' %
           ('' if args.dry_run else ' and no skip (a GPU is there)'))
  status = 'timeout' if timed_out else ('pass' if ok else 'fail')
  return {'status': status, 'figures': figures, 'notes': notes}


def throughput_command(args, budget_s, json_path):
  """The benchmarks.gpu_throughput command of step 2."""
  command = [args.python, '-m', 'benchmarks.gpu_throughput', '--paired',
             '--variants=%s' % args.throughput_variants, '--clones=', '--json_out=%s' % json_path,
             '--time_budget_s=%d' % max(1, budget_s - 20)]
  if args.dry_run:
    return command + ['--quick']
  return command + ['--layouts=NHWC,NCHW', '--batch_sizes=128,64', '--warmup=10',
                    '--steps=20', '--repeats=5', '--gpu_memory_mb=60000']


def run_throughput(args, budget_s, log_path):
  """Step 2: benchmarks.gpu_throughput --paired, its JSON as the figures."""
  json_path = os.path.join(args.output_dir, 'throughput.json')
  code, _ = run_process(throughput_command(args, budget_s, json_path), log_path, budget_s,
                        step_env(args.dry_run))
  if code is None:
    return {'status': 'timeout', 'figures': {}, 'notes': 'killed at the step budget'}
  if code != 0 or not os.path.exists(json_path):
    return {'status': 'fail', 'figures': {'returncode': code},
            'notes': 'benchmarks.gpu_throughput failed; see the log'}
  with open(json_path) as f:
    figures = json.load(f)
  ok = bool(figures['cells'])
  return {'status': 'pass' if ok else 'fail', 'figures': figures,
          'notes': 'pass: at least one cell measured. Anchors: NVIDIA TF1 ResNet-50 on one '
                   'A100 with AMP+XLA %.0f img/s (an H100 should exceed it); trainer >= %.2f x '
                   'the bare loop.' % (A100_AMP_XLA_ANCHOR, TRAINER_OVER_RAW_GOAL)}


def run_steps_module(args, name, budget_s, log_path):
  """Steps env, 3, 4 and 5: benchmarks.gpu_check_steps <name>."""
  json_path = os.path.join(args.output_dir, '%s.json' % name)
  # As a script, not `-m benchmarks...`: the package's __init__ imports TensorFlow, and
  # the env step must still report when TensorFlow cannot be imported.
  # The step prints every thread's stack shortly before its budget ends, so a
  # step that hangs says where.
  command = [args.python, os.path.join(REPO_ROOT, 'benchmarks', 'gpu_check_steps.py'), name,
             '--result_json=%s' % json_path,
             '--stacks_after_s=%.0f' % max(1.0, budget_s - STACKS_BEFORE_BUDGET_S)] + (
                 ['--dry_run'] if args.dry_run else [])
  code, _ = run_process(command, log_path, budget_s, step_env(args.dry_run))
  if code is None:
    return {'status': 'timeout', 'figures': {}, 'notes': 'killed at the step budget'}
  if not os.path.exists(json_path):
    return {'status': 'fail', 'figures': {'returncode': code},
            'notes': 'the step ended (exit %s) without a result; see the log' % code}
  with open(json_path) as f:
    return json.load(f)


def install_cuda(args):
  """pip install of TensorFlow's CUDA build into args.python; returns (ok, seconds)."""
  log_path = os.path.join(args.output_dir, 'install_cuda.log')
  code, seconds = run_process([args.python, '-m', 'pip', 'install', '-q', CUDA_INSTALL],
                              log_path, 600, dict(os.environ))
  return code == 0, seconds


def run_check(args):
  """Runs the selected steps; returns the summary dict (also written to disk)."""
  os.makedirs(args.output_dir, exist_ok=True)
  total = args.total_budget_s or (None if args.dry_run else TOTAL_BUDGET_S)
  summary = {'started_utc': datetime.datetime.now(datetime.timezone.utc).isoformat(
      timespec='seconds'), 'dry_run': args.dry_run, 'total_budget_s': total, 'steps': {}}
  if args.install_cuda:
    ok, seconds = install_cuda(args)
    summary['install_cuda'] = {'ok': ok, 'seconds': seconds, 'package': CUDA_INSTALL,
                               'log': 'install_cuda.log'}
  started = time.perf_counter()
  no_gpu_reason = None
  for name, number, title, gpu_budget, dry_budget in STEPS:
    record = {'number': number, 'title': title, 'log': '%s.log' % name}
    budget = dry_budget if args.dry_run else args.step_budget_s.get(name, gpu_budget)
    if budget is None:  # The last step gets what is left.
      budget = (total - (time.perf_counter() - started) - MARGIN_S) if total else dry_budget
    if total:
      budget = min(budget, total - (time.perf_counter() - started) - MARGIN_S)
    record['budget_s'] = round(budget, 1)
    if name not in args.steps:
      record.update(status='skip', notes='not selected (--steps)')
    elif no_gpu_reason and name != 'env':
      record.update(status='skip', notes=no_gpu_reason)
    elif budget < 20:
      record.update(status='skip', notes='no time left in the total budget')
    else:
      log_path = os.path.join(args.output_dir, record['log'])
      step_started = time.perf_counter()
      if name == 'gpu_tests':
        result = run_gpu_tests(args, budget, log_path)
      elif name == 'throughput':
        result = run_throughput(args, budget, log_path)
      else:
        result = run_steps_module(args, name, budget, log_path)
      record.update(result)
      record['seconds'] = round(time.perf_counter() - step_started, 1)
      if name == 'env' and record['status'] != 'pass':
        no_gpu_reason = ('TensorFlow does not import (see the env step): not run' if
                         args.dry_run else
                         'TensorFlow sees no GPU or does not import (see the env step): not run')
    summary['steps'][name] = record
    print('[gpu_check] %-16s %-8s %s' % (name, record['status'],
                                         '%.0f s' % record['seconds'] if 'seconds' in record
                                         else record.get('notes', '')), flush=True)
  summary['seconds'] = round(time.perf_counter() - started, 1)
  summary['passed'] = all(s['status'] in ('pass', 'skip') for s in summary['steps'].values()
                          if s.get('notes') != 'not selected (--steps)') and not no_gpu_reason
  with open(os.path.join(args.output_dir, 'gpu_check.json'), 'w') as f:
    json.dump(summary, f, indent=1)
  with open(os.path.join(args.output_dir, 'gpu_check.md'), 'w') as f:
    f.write(markdown(summary))
  if args.bundle:
    with tarfile.open(args.bundle, 'w:gz') as bundle:
      bundle.add(args.output_dir, arcname='gpu_check')
  return summary


def _fmt(value, pattern='%.1f'):
  return 'n/a' if value is None else pattern % value


def _env_line(figures):
  if 'tensorflow' not in figures:
    return ''
  return 'TF %s (CUDA build %s, CUDA %s, cuDNN %s); GPUs seen: %s; nvidia-smi: %s' % (
      figures.get('tensorflow'), figures.get('is_cuda_build'), figures.get('cuda_version'),
      figures.get('cudnn_version'), ', '.join(figures.get('physical_gpus') or []) or 'none',
      figures.get('nvidia_smi') or 'not found')


def _tests_line(figures):
  return '; '.join('%s: %d tests, %d failed, %d errors, %d skipped' % (
      label, c['tests'], c['failures'], c['errors'], c['skipped'])
                   for label, c in figures.items())


def _multi_clone_line(figures):
  parts = []
  for mode in ('parameter_server', 'replicated'):
    m = figures.get(mode)
    if m:
      parts.append('%s%s: loss %s -> %s (first/last %d), %s ex/s, step %d' % (
          mode, ' (%s)' % m['all_reduce'] if 'all_reduce' in m else '',
          _fmt(m['first_mean'], '%.3f'), _fmt(m['last_mean'], '%.3f'), m['window'],
          _fmt(m['examples_per_sec']), m['global_step']))
  return '; '.join(parts)


def _mixed_line(figures):
  skipped = figures.get('skipped_step')
  if not skipped:
    return ''
  return ('run %d with inf gradients: variables unchanged %s, loss scale %s -> %s, global '
          'step %d -> %d; last-%d loss mixed %.4f vs fp32 %.4f (%.1f %%, tolerance %.0f %%)' % (
              skipped['injected_at_run'], skipped['variables_unchanged'],
              _fmt(skipped['loss_scale_before'], '%g'), _fmt(skipped['loss_scale_after'], '%g'),
              skipped['global_step_before'], skipped['global_step_after'], figures['window'],
              figures['mixed_last_mean'], figures['fp32_last_mean'],
              100 * figures['relative_difference'], 100 * figures['tolerance']))


def _input_line(figures):
  medians = figures.get('median_examples_per_sec')
  if not medians:
    return ''
  return ('batch %d: queue-fed %.1f ex/s, compute-only %.1f, dequeue-only %.1f; GPU waits '
          '%.0f %% of a step (step times), nvidia-smi idle %s; keeps up: %s' % (
              figures['batch'], medians['queue_fed'], medians['compute_only'],
              medians['dequeue_only'], 100 * figures['gpu_wait_fraction_from_step_times'],
              _fmt(figures['gpu_idle_fraction_nvidia_smi'] and
                   100 * figures['gpu_idle_fraction_nvidia_smi'], '%.0f %%'),
              figures['keeps_up']))


def _throughput_line(figures):
  cells = figures.get('cells') or []
  if not cells:
    return ''
  best = max(cells, key=lambda c: c['raw_median'])
  return ('%d cells measured, %d skipped (budget); fastest bare loop %s %s batch %d: %.1f '
          'img/s (%.2f x the A100 AMP+XLA anchor %.0f), trainer %.1f (x%.3f)' % (
              len(cells), len(figures.get('skipped') or []), best['variant'], best['layout'],
              best['batch'], best['raw_median'], best['raw_median'] / A100_AMP_XLA_ANCHOR,
              A100_AMP_XLA_ANCHOR, best['slimtrain_median'], best['slimtrain_over_raw']))


_LINES = {'env': _env_line, 'gpu_tests': _tests_line, 'multi_clone': _multi_clone_line,
          'mixed_precision': _mixed_line, 'input_pipeline': _input_line,
          'throughput': _throughput_line}


def _throughput_table(figures):
  lines = ['## Throughput: %s %dx%d synthetic, %d warm-up + %d steps x %d repeats%s' % (
      figures['net'], figures['image_size'], figures['image_size'], figures['warmup'],
      figures['steps'], figures['repeats'],
      ', trainer and bare loop alternating in one session' if figures['paired'] else ''), '',
      '| variant | layout | batch | trainer img/s | bare img/s | trainer/bare | per repeat '
      '| >= %.2f | bare speed-up vs fp32 |' % TRAINER_OVER_RAW_GOAL,
      '| --- | --- | ---: | ---: | ---: | ---: | --- | --- | ---: |']
  for c in figures['cells']:
    lines.append('| %s | %s | %d | %.1f | %.1f | %.3f | %s | %s | %s |' % (
        c['variant'], c['layout'], c['batch'], c['slimtrain_median'], c['raw_median'],
        c['slimtrain_over_raw'], ' '.join('%.3f' % r for r in c['paired_ratios']),
        c['verdict_0.98'], _fmt(c['raw_speedup_over_fp32'], '%.2f')))
  for c in figures.get('skipped') or []:
    lines.append('| %s | %s | %d | skipped: would not fit (about %.0f s) | | | | | |' % (
        c['variant'], c['layout'], c['batch'], c['estimated_s']))
  lines.append('')
  lines.append('Per repeat: img/s of each segment in the JSON (`slimtrain_img_per_sec`, '
               '`raw_img_per_sec`).')
  return lines


def markdown(summary):
  """The Markdown summary of a `run_check` summary dict."""
  env = summary['steps'].get('env', {}).get('figures') or {}
  title = 'dry run on the CPU (tiny sizes; no GPU figures)' if summary['dry_run'] else (
      (env.get('nvidia_smi') or 'no GPU found').splitlines()[0])
  lines = ['# GPU check: %s' % title, '',
           'Started %s; %.0f s in all (budget %s); overall: %s.' % (
               summary['started_utc'], summary['seconds'],
               _fmt(summary['total_budget_s'], '%.0f s'),
               'passed' if summary['passed'] else 'FAILED'), '']
  if 'install_cuda' in summary:
    install = summary['install_cuda']
    lines += ['pip install %s: %s in %.0f s (install_cuda.log).' % (
        install['package'], 'ok' if install['ok'] else 'FAILED', install['seconds']), '']
  lines += ['| step | status | seconds / budget | figures |', '| --- | --- | ---: | --- |']
  for name, record in summary['steps'].items():
    figures = record.get('figures') or {}
    line = ''
    if figures:
      try:
        line = _LINES[name](figures)
      except (KeyError, TypeError, ValueError) as e:  # A partial result still gets a row.
        line = 'figures in gpu_check.json (%s: %s)' % (type(e).__name__, e)
    label = name if record['number'] is None else '%d %s' % (record['number'], name)
    lines.append('| %s | %s | %s / %.0f | %s |' % (
        label, record['status'], _fmt(record.get('seconds'), '%.0f'), record['budget_s'],
        line or record.get('notes', '')))
  throughput = summary['steps'].get('throughput', {}).get('figures') or {}
  if throughput.get('cells'):
    lines += [''] + _throughput_table(throughput)
  lines += ['', '## Criteria and notes', '']
  for name, record in summary['steps'].items():
    lines.append('- %s (%s, log `%s`): %s' % (name, record['title'], record['log'],
                                              record.get('notes', '')))
  return '\n'.join(lines) + '\n'


def main(argv=None):
  args = parse_args(sys.argv[1:] if argv is None else argv)
  summary = run_check(args)
  print('[gpu_check] %s in %.0f s; summary %s' % (
      'passed' if summary['passed'] else 'FAILED', summary['seconds'],
      os.path.join(args.output_dir, 'gpu_check.md')), flush=True)
  return 0 if summary['passed'] else 1


if __name__ == '__main__':
  sys.exit(main())
