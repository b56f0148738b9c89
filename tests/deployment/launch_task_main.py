"""A tiny task program for the launcher tests (tests/deployment/test_launch.py).

Reads its task from TF_CONFIG, records each attempt and how it ended in
`--record_dir/<type>-<index>.txt`, prints its TF_CONFIG and a few step lines,
then exits with the code `--exit_codes` gives this task for this attempt:

    python -m tests.deployment.launch_task_main --record_dir=D \
        --exit_codes='worker:0=129,129' --run_secs=0.5

means worker 0 exits 129 on its first two attempts and 0 from the third on;
every other task exits 0 after `--run_secs`. Tasks named by `--until_sigterm`
instead run until SIGTERM (recording "waiting" once they can take it) and then
exit 143 (recording "sigterm"); those named by `--ignore_sigterm` run until
SIGKILL. `--wait_for` makes the finishing tasks wait for such records first,
so that no SIGTERM reaches a task before its handler is installed. It does not
import TensorFlow, so a job of several tasks starts in about a second.
"""

import argparse
import json
import os
import re
import signal
import sys
import time


def _task():
  config = json.loads(os.environ.get('TF_CONFIG', '{}'))
  task = config.get('task', {})
  return '%s:%d' % (task.get('type', 'worker'), task.get('index', 0))


def _codes_for(spec, task):
  """The per-attempt exit codes `--exit_codes` gives `task` ([] for none)."""
  for item in filter(None, spec.split(';')):
    name, _, codes = item.partition('=')
    if name == task:
      return [int(c) for c in codes.split(',')]
  return []


def _record(record_dir, task, text):
  path = os.path.join(record_dir, '%s.txt' % task.replace(':', '-'))
  with open(path, 'a') as f:
    f.write(text + '\n')
  with open(path) as f:
    return f.read().splitlines()


def _wait_for_lines(record_dir, task, count, prefix='exit', timeout_secs=120):
  """Waits until `task` recorded `count` lines starting with `prefix`."""
  path = os.path.join(record_dir, '%s.txt' % task.replace(':', '-'))
  deadline = time.time() + timeout_secs
  while time.time() < deadline:
    if os.path.exists(path):
      with open(path) as f:
        if sum(line.startswith(prefix) for line in f) >= int(count):
          return
    time.sleep(0.05)
  raise SystemExit('%s did not record %s %r lines within %ss' % (
      task, count, prefix, timeout_secs))


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--record_dir', required=True)
  parser.add_argument('--exit_codes', default='')
  parser.add_argument('--until_sigterm', default='')
  parser.add_argument('--run_secs', type=float, default=0.0)
  parser.add_argument('--ignore_sigterm', default='',
                      help='tasks that ignore SIGTERM and run until killed')
  parser.add_argument('--wait_for', default='',
                      help='TASK=LINE;...: before finishing, wait until each TASK recorded '
                      'LINE (e.g. "chief:0=waiting": its SIGTERM handler is in place)')
  parser.add_argument('--after_wait_secs', type=float, default=0.0,
                      help='Seconds to sleep after the waits, before exiting.')
  parser.add_argument('--wait_for_exits', default='',
                      help='TASK=N: before finishing, wait (up to 120 s) until TASK '
                      'recorded N exits')
  args = parser.parse_args()
  task = _task()
  lines = _record(args.record_dir, task, 'start')
  attempt = lines.count('start')
  print('TF_CONFIG=%s' % os.environ.get('TF_CONFIG'), flush=True)
  print('attempt %d of %s' % (attempt, task), flush=True)
  print('network namespace %s' % os.readlink('/proc/self/ns/net'), flush=True)
  if task in re.split('[,;]', args.ignore_sigterm):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _record(args.record_dir, task, 'ignoring')
    print('%s ignoring SIGTERM' % task, flush=True)
    while True:
      time.sleep(0.1)
  if task in re.split('[,;]', args.until_sigterm):
    def on_sigterm(signum, frame):
      del signum, frame
      _record(args.record_dir, task, 'sigterm')
      print('%s got SIGTERM' % task, flush=True)
      sys.exit(143)
    signal.signal(signal.SIGTERM, on_sigterm)
    _record(args.record_dir, task, 'waiting')
    print('%s waiting for SIGTERM' % task, flush=True)
    while True:
      time.sleep(0.1)
  for step in (1, 2):
    print('I0000 00:00:00.000000 1 training_loop.py:1] global step %d, loss = %.1f, '
          '1.00 steps/sec' % (step, 1.0 / step), flush=True)
  time.sleep(args.run_secs)
  if args.wait_for_exits:
    _wait_for_lines(args.record_dir, *args.wait_for_exits.split('='))
  for item in filter(None, args.wait_for.split(';')):
    other, line = item.split('=')
    _wait_for_lines(args.record_dir, other, 1, line)
  # Lets the launcher see the exits waited for before this task's own.
  time.sleep(args.after_wait_secs)
  codes = _codes_for(args.exit_codes, task)
  code = codes[attempt - 1] if attempt <= len(codes) else 0
  _record(args.record_dir, task, 'exit %d' % code)
  return code


if __name__ == '__main__':
  sys.exit(main())
