"""fault_tolerance: watchdogs, SIGTERM in a blocked run, bounded closes, recovery logs.

The replica watch of sync jobs has its own file: test_replica_watch.py.
"""

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import tensorflow as tf

from deployment import cluster as cluster_lib
from deployment import cluster_runtime
from deployment import exit_codes
from deployment import fault_tolerance
from tests import cluster_util

tf.compat.v1.disable_eager_execution()

# A python program blocked for good inside TensorFlow (a dequeue on an empty queue).
_BLOCKED_PROGRAM = textwrap.dedent('''
    import signal, sys, tensorflow as tf
    from deployment import fault_tolerance
    tf.compat.v1.disable_eager_execution()
    queue = tf.queue.FIFOQueue(1, [tf.int32], shapes=[[]])
    dequeue = queue.dequeue()
    %s
    print('BLOCKING', flush=True)
    with tf.compat.v1.Session() as sess:
      sess.run(dequeue)
    print('UNBLOCKED', flush=True)
''')


def _run_script(script, marker, send_sigterm=False, timeout=60):
  """Runs a python `script` until it exits; returns (exit code, output, seconds after `marker`).

  The seconds count from the first output line containing `marker` (the
  program reached the wait under test), so a slow start (importing
  TensorFlow on a loaded machine) does not count. With `send_sigterm`, the
  program gets SIGTERM 0.5 s after the marker.
  """
  env = dict(os.environ, PYTHONPATH=cluster_util.REPO_ROOT, TF_CPP_MIN_LOG_LEVEL='2',
             CUDA_VISIBLE_DEVICES='')
  process = subprocess.Popen([sys.executable, '-u', str(script)], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, env=env, cwd=cluster_util.REPO_ROOT)
  lines = []
  marked = None
  try:
    for line in process.stdout:
      lines.append(line.decode(errors='replace'))
      if marker in lines[-1]:
        marked = time.time()
        break
    if send_sigterm:
      time.sleep(0.5)
      process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=timeout)
  finally:
    if process.poll() is None:
      process.kill()
      process.wait()
  lines.append(process.stdout.read().decode(errors='replace'))
  assert marked is not None, ''.join(lines)
  return code, ''.join(lines), time.time() - marked


def _run_blocked(tmp_path, setup, send_sigterm=False, timeout=60):
  """Runs _BLOCKED_PROGRAM with `setup` inserted; returns (exit code, output, seconds blocked)."""
  script = tmp_path / 'blocked.py'
  script.write_text(_BLOCKED_PROGRAM % setup)
  return _run_script(script, 'BLOCKING', send_sigterm=send_sigterm, timeout=timeout)


@pytest.mark.cluster
def test_watchdog_ends_a_process_blocked_in_a_session_run(tmp_path):
  code, output, _ = _run_blocked(
      tmp_path, "fault_tolerance.Watchdog(1.0, 129, 'stuck; giving up').start()")
  assert code == exit_codes.RETRYABLE, output
  assert 'stuck; giving up' in output
  assert 'UNBLOCKED' not in output


# A watchdog cancelled at once, then the program lives past its deadline. In a
# process of its own: a watchdog that fires ends its process (os._exit), which
# must never be the pytest worker's.
_CANCELLED_WATCHDOG_PROGRAM = textwrap.dedent('''
    import time
    from deployment import fault_tolerance
    fired = []
    watchdog = fault_tolerance.Watchdog(2.0, 129, 'x', last_words=fired.append).start()
    was_active = watchdog.active
    watchdog.cancel()
    print('CANCELLED active before %s, after %s' % (was_active, watchdog.active), flush=True)
    time.sleep(3.0)  # past the 2 s deadline
    print('ALIVE fired=%s' % fired, flush=True)
''')


@pytest.mark.cluster
def test_cancelled_watchdog_does_nothing(tmp_path):
  script = tmp_path / 'cancelled.py'
  script.write_text(_CANCELLED_WATCHDOG_PROGRAM)
  code, output, _ = _run_script(script, 'CANCELLED')
  assert code == 0, output
  assert 'CANCELLED active before True, after False' in output
  assert 'ALIVE fired=[]' in output


@pytest.mark.cluster
def test_signal_watch_hears_sigterm_while_the_main_thread_is_blocked(tmp_path):
  # The Python handler would only run after the blocked run returns (never);
  # the watch's thread acts at once.
  setup = textwrap.dedent('''
      signal.signal(signal.SIGTERM, lambda *unused: print('HANDLER', flush=True))
      fault_tolerance.SignalWatch(
          lambda signum: fault_tolerance.exit_now(128 + signum, 'got signal %d' % signum)
      ).install()''')
  code, output, _ = _run_blocked(tmp_path, setup, send_sigterm=True)
  assert code == 143, output
  assert 'got signal 15' in output
  assert 'HANDLER' not in output and 'UNBLOCKED' not in output


@pytest.mark.cluster
@pytest.mark.parametrize('is_chief,checkpoint_written,expected_code', [
    (True, False, exit_codes.RETRYABLE),  # no preemption checkpoint: an older one is used
    (True, True, exit_codes.PREEMPTED),
    (False, False, exit_codes.PREEMPTED),  # a worker writes none
])
def test_sigterm_grace_asks_for_the_stop_then_exits_after_the_grace(
    tmp_path, is_chief, checkpoint_written, expected_code):
  setup = textwrap.dedent('''
      def on_sigterm():
        print('STOP REQUESTED', flush=True)
        grace.checkpoint_written = %s
      grace = fault_tolerance.SigtermGrace(2, 'deploy_config.termination_grace_secs',
                                           is_chief=%s, on_sigterm=on_sigterm)
      handling = grace.handling()  # kept: a collected generator would leave the block
      handling.__enter__()''' % (checkpoint_written, is_chief))
  code, output, blocked_secs = _run_blocked(tmp_path, setup, send_sigterm=True)
  assert code == expected_code, output
  # Asked at once from the watch thread (the blocked main thread never runs
  # the Python handler), then the deadline names the setting.
  assert 'STOP REQUESTED' in output
  assert ('SIGTERM: still running after deploy_config.termination_grace_secs=2 '
          '(blocked on a peer?); exiting') in output
  assert 'UNBLOCKED' not in output
  assert blocked_secs < 2 + 15, output  # SIGTERM 0.5 s in, the 2 s grace, a loaded machine
  # Where it was stuck: a thread's stack ends in the program's own blocking sess.run line.
  script_lines = (tmp_path / 'blocked.py').read_text().splitlines()
  run_line = script_lines.index('  sess.run(dequeue)') + 1
  stacks = output.split('stacks of the threads still running:', 1)[1]
  assert 'File "%s", line %d in <module>' % (tmp_path / 'blocked.py', run_line) in stacks, output


def test_sigterm_grace_outside_the_main_thread_changes_nothing():
  grace = fault_tolerance.SigtermGrace(1, 'x', True, lambda: None)
  handlers = []

  def enter():
    with grace.handling():
      handlers.append(signal.getsignal(signal.SIGTERM))

  before = signal.getsignal(signal.SIGTERM)
  thread = threading.Thread(target=enter)
  thread.start()
  thread.join()
  assert handlers == [before]


# A gRPC session with a step still running (a py_func sleeping), closed with a bound.
_SLOW_CLOSE_PROGRAM = textwrap.dedent('''
    import threading, time, tensorflow as tf
    from deployment import fault_tolerance
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
    tf.compat.v1.disable_eager_execution()
    server = tf.distribute.Server.create_local_server()
    def sleep():
      time.sleep(%(sleep)d)
      print('STEP ENDED at %%.3f' %% time.time(), flush=True)
      return 0
    slow = tf.compat.v1.py_func(sleep, [], tf.int64)
    sess = tf.compat.v1.Session(server.target)
    def step():
      try:
        sess.run(slow)
      except tf.errors.CancelledError:
        pass
    threading.Thread(target=step, daemon=True).start()
    time.sleep(1)
    start = time.time()
    closed = fault_tolerance.close_session(sess.close, %(timeout)s, ['/job:ps/task:1'])
    print('CLOSED %%s after %%.1f s at %%.3f' %% (closed, time.time() - start, time.time()),
          flush=True)
    fault_tolerance.exit_process(0)
''')


def _close_slowly(tmp_path, sleep, timeout):
  """Runs _SLOW_CLOSE_PROGRAM; returns (exit code, output, seconds from CLOSED to the exit)."""
  script = tmp_path / 'slow_close.py'
  script.write_text(_SLOW_CLOSE_PROGRAM % dict(sleep=sleep, timeout=timeout))
  return _run_script(script, 'CLOSED', timeout=sleep + 60)


@pytest.mark.cluster
def test_session_close_waiting_on_a_step_gives_up_after_its_bound_naming_the_wait(tmp_path):
  # Issue 18 item 5: Session.close() waited silently for whatever was still
  # running in the session; now it says so and the task goes on after the bound.
  code, output, exit_secs = _close_slowly(tmp_path, sleep=120, timeout=2)
  assert code == 0, output
  assert re.search(r'CLOSED False after 2\.\d s', output), output
  assert ('gave up closing the training session after 2 s (still waiting for the steps still '
          'running in it and for /job:ps/task:1 to drop it)') in output
  assert exit_secs < 30, output  # The process did not wait for the 120 s step.


@pytest.mark.cluster
def test_slow_session_close_reports_what_it_waits_for_then_closes(tmp_path):
  code, output, _ = _close_slowly(tmp_path, sleep=8, timeout='None')
  assert code == 0, output
  assert ('closing the training session: 5 s so far; TensorFlow waits for the steps still '
          'running in it and for /job:ps/task:1 to drop it') in output
  # The close returned once the step had ended (not before, and promptly
  # after), timed from the lines the program printed at each.
  step_ended = float(re.search(r'STEP ENDED at ([0-9.]+)', output).group(1))
  closed = float(re.search(r'CLOSED True after [0-9.]+ s at ([0-9.]+)', output).group(1))
  assert 0 <= closed - step_ended < 5, output
  assert 'gave up' not in output


_STEP_WATCH_PROGRAM = textwrap.dedent('''
    import time
    from deployment import ports, step_watch
    address = '127.0.0.1:%%d' %% ports.pick_unused_ports(1)[0]  # nothing listens there
    watch = step_watch.StepWatch(2, [('/job:ps/task:1', address)],
                                 'deploy_config.recovery_timeout_secs', poll_secs=0.1,
                                 last_words=lambda why: print('LAST WORDS:', why, flush=True))
    for step in range(1, 6):  # steps every 0.5 s keep it quiet
      watch.step_done(step)
      time.sleep(0.5)
    watch.stop()
    time.sleep(3)  # stopped: no exit
    %s
    print('STALLING', flush=True)
    time.sleep(60)
''')
_STALLS = {
    'step': 'watch.step_done(6)',
    'final_save': 'watch.step_done(6, ending=True)',
    # Stopped and re-armed at once (a rebuilt session): the stopped thread,
    # still inside its poll, must not take the new watch with it.
    'session_start': ('watch.step_done(6); watch.stop(); watch.session_starting('
                      '4, "deploy_config.startup_timeout_secs + recovery_timeout_secs")'),
    # A worker's startup_delay_steps wait: each answered step read re-arms the
    # start deadline, here for longer than the deadline itself.
    'startup_wait': ('watch.step_done(6); watch.stop(); watch.session_starting('
                     '2, "deploy_config.startup_timeout_secs + recovery_timeout_secs")\n'
                     'for _ in range(6):\n'
                     '    time.sleep(0.5)\n'
                     '    watch.still_starting()'),
}
_STALL_MESSAGES = {
    'step': ('no training step finished for 2 s since global step 6', 'recovery_timeout_secs=2'),
    'final_save': ('training ended at global step 6, but its final checkpoint and shutdown '
                   'have not finished in 2 s', 'recovery_timeout_secs=2'),
    'session_start': ('no training step finished within 4 s of starting the session',
                      'startup_timeout_secs + recovery_timeout_secs=4'),
    'startup_wait': ('no training step finished within 2 s of starting the session',
                     'startup_timeout_secs + recovery_timeout_secs=2'),
}


@pytest.mark.parametrize('stall', sorted(_STALLS))
def test_step_watch_exits_retryable_naming_the_unreachable_ps(tmp_path, stall):
  script = tmp_path / 'step_watch.py'
  script.write_text(_STEP_WATCH_PROGRAM % _STALLS[stall])
  code, output, stalled_secs = _run_script(script, 'STALLING', timeout=120)
  assert code == exit_codes.RETRYABLE, output
  assert stalled_secs < 4 + 15, output  # a 2-4 s timeout, 1 s probe, a loaded machine
  assert output.index('STALLING') < output.index('exiting retryable'), output
  what, setting = _STALL_MESSAGES[stall]
  pattern = (re.escape(what) + r'; unreachable: /job:ps/task:1 \(127\.0\.0\.1:\d+\) '
             r'.*past deploy_config\.' + re.escape(setting) + ', exiting retryable')
  assert re.search(pattern, output), output
  # The last words (the chief telling the ps tasks) carry the same reason.
  assert re.search('LAST WORDS: ' + pattern, output), output


def test_chief_watch_message_names_the_ps_tasks_unreachable_too():
  # A worker whose step hangs on a partitioned ps may see the chief go first.
  jobs = cluster_util.local_cluster(num_workers=1, num_ps=2, chief=True)
  worker = cluster_lib.ClusterConfig(jobs, 'worker', 0)
  with socket.socket() as ps0:  # ps0 accepts connections; the chief and ps1 do not.
    host, port = jobs['ps'][0].rsplit(':', 1)
    ps0.bind((host, int(port)))
    ps0.listen()
    watch = cluster_runtime.ChiefWatch(worker, chief_timeout_secs=0, startup_timeout_secs=0,
                                       chief_seen=True, peers=cluster_runtime.ps_peers(worker))
    time.sleep(0.1)
    with pytest.raises(cluster_runtime.ChiefLostError) as raised:
      watch.check()
  assert str(raised.value) == (
      'worker task 0: chief /job:chief/task:0/device:CPU:0 unreachable for 0 s (limit 0 s, '
      'deploy_config.chief_timeout_secs); unreachable too: /job:ps/task:1 (%s); exiting'
      % jobs['ps'][1])


_RECOVERY_PROGRAM = textwrap.dedent('''
    import time
    import tensorflow as tf
    from deployment import fault_tolerance, ports
    gone = ['127.0.0.1:%d' % port for port in ports.pick_unused_ports(2)]
    recovery = fault_tolerance.Recovery(
        2, last_words=lambda why: print('LAST WORDS:', why, flush=True),
        peers=[('/job:ps/task:0', gone[0]), ('/job:ps/task:1', gone[1])])
    recovery.lost(tf.errors.UnavailableError(None, None, 'Socket closed from '
                                             '/job:ps/replica:0/task:0'), 12)
    time.sleep(60)
''')


def test_recovery_past_its_deadline_exits_retryable_naming_every_unreachable_ps(tmp_path):
  script = tmp_path / 'recovery.py'
  script.write_text(_RECOVERY_PROGRAM)
  env = dict(os.environ, PYTHONPATH=cluster_util.REPO_ROOT, TF_CPP_MIN_LOG_LEVEL='2')
  result = subprocess.run([sys.executable, '-u', str(script)], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, env=env, timeout=120, check=False)
  output = result.stdout.decode(errors='replace')
  assert result.returncode == exit_codes.RETRYABLE, output
  message = (r'lost /job:ps/task:0 and could not rebuild the session within '
             r'deploy_config\.recovery_timeout_secs=2 \(unreachable: '
             r'/job:ps/task:0 \(127\.0\.0\.1:\d+\), /job:ps/task:1 \(127\.0\.0\.1:\d+\)\); '
             r'exiting retryable')
  assert re.search(message, output), output
  assert re.search('LAST WORDS: ' + message, output), output


def test_task_names_come_from_error_messages():
  message = ('Socket closed ... /job:ps/replica:0/task:1 and then '
             '/job:worker/replica:0/task:0 and /job:ps/replica:0/task:1 again')
  assert fault_tolerance.task_names(message) == ['/job:ps/task:1', '/job:worker/task:0']
  assert fault_tolerance.task_names('') == []


def test_lost_tasks_name_the_ps_first_then_any_task_then_a_peer():
  both = 'from /job:worker/replica:0/task:0: /job:ps/replica:0/task:1 closed'
  assert fault_tolerance.lost_tasks(both) == '/job:ps/task:1'
  assert fault_tolerance.lost_tasks('/job:chief/replica:0/task:0 gone') == '/job:chief/task:0'
  assert fault_tolerance.lost_tasks('Socket closed') == 'a peer'


def test_error_summary_skips_tf_2_headers():
  # A failed step's message on TF 2.21, as the Estimator path logged it.
  message = ('Graph execution error:\n\n=====================\n'
             'UNAVAILABLE: From /job:ps/replica:0/task:0:\nrecvmsg:Connection reset by peer\n'
             'Additional GRPC error information ...')
  assert fault_tolerance.error_summary(message) == (
      'UNAVAILABLE: From /job:ps/replica:0/task:0: recvmsg:Connection reset by peer')
  assert fault_tolerance.error_summary('Socket closed') == 'Socket closed'
  assert fault_tolerance.error_summary('') == ''


def test_recovery_logs_restored_step_and_lost_steps(caplog):
  with socket.socket() as listener:  # The peer "is back".
    listener.bind(('127.0.0.1', 0))
    listener.listen(1)
    recovery = fault_tolerance.Recovery(
        timeout_secs=60, peers=[('/job:ps/task:1', '127.0.0.1:%d' % listener.getsockname()[1])])
    error = tf.errors.UnavailableError(None, None, 'Connection reset by peer from '
                                       '/job:ps/replica:0/task:1')
    recovery.lost(error, last_step=57)
    assert recovery.recovering
    recovery.wait_for_peers()
  with caplog.at_level('WARNING'):
    recovery.resumed(50)
  assert not recovery.recovering
  assert ('recovered from a lost peer: restored global step 50, 7 step(s) lost '
          '(/job:ps/task:1 was lost at global step 57)') in caplog.text
  recovery.resumed(51)  # Not recovering any more: nothing logged twice.
  assert caplog.text.count('recovered from a lost peer') == 1


def test_a_second_recovery_never_reports_the_step_of_the_first(caplog):
  # A loss seen outside a step (a Supervisor thread) has no step of its own; the
  # recovered line used to name the step of the recovery before it.
  with socket.socket() as listener:
    listener.bind(('127.0.0.1', 0))
    listener.listen(1)
    recovery = fault_tolerance.Recovery(
        timeout_secs=60, peers=[('/job:ps/task:1', '127.0.0.1:%d' % listener.getsockname()[1])])
    error = tf.errors.UnavailableError(None, None, 'Socket closed from /job:ps/replica:0/task:1')
    recovery.lost(error, last_step=109)
    recovery.resumed(112)
    recovery.lost(error, last_step=None)
    with caplog.at_level('WARNING'):
      recovery.resumed(141)
  assert ('recovered from a lost peer: restored global step 141, 0 step(s) lost '
          '(/job:ps/task:1 was lost at global step None)') in caplog.text


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
