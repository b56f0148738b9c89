"""tests/fork_server.py: a forked child is set up as `python -u -m module` would be.

Each probe is a real program written to tmp_path, run by a real fork server
(one per test process, as in the suite); the checks are what a test of a
cluster task relies on: argv, environment, working directory, import path,
exit code, signals, output that appears line by line, its own session.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from tests import cluster_util
from tests import fork_server

_PROBE = '''
import json, os, sys, time
import numpy
print(json.dumps({
    'argv': sys.argv, 'cwd': os.getcwd(), 'path0': sys.path[0], 'pid': os.getpid(),
    'ppid': os.getppid(), 'own_session': os.getsid(0) == os.getpid(),
    'tf_config': os.environ.get('TF_CONFIG'), 'draw': int(numpy.random.randint(1 << 30)),
    'tensorflow_loaded': 'tensorflow' in sys.modules, 'name': __name__}))
print('to stderr', file=sys.stderr)
if '--sleep' in sys.argv:
  time.sleep(300)
sys.exit(int(sys.argv[1]))
'''


def _env(**extra):
  """The environment cluster_util.ProcessGroup gives its tasks."""
  env = dict(os.environ, PYTHONPATH=cluster_util.REPO_ROOT, TF_CPP_MIN_LOG_LEVEL='2',
             CUDA_VISIBLE_DEVICES='')
  env.pop('TF_CONFIG', None)
  env.pop(fork_server.DISABLE_ENV, None)
  env.update(extra)
  return env


@pytest.fixture
def probe_dir(tmp_path):
  (tmp_path / 'probe_main.py').write_text(_PROBE)
  return str(tmp_path)


def _run_probe(probe_dir, *args, **extra_env):
  result = fork_server.run([sys.executable, '-u', '-m', 'probe_main'] + list(args),
                           cwd=probe_dir, env=_env(**extra_env), capture_output=True, text=True,
                           timeout=120)
  return result, json.loads(result.stdout.splitlines()[0])


def test_module_child_gets_argv_env_cwd_path_and_exit_code(probe_dir):
  result, seen = _run_probe(probe_dir, '7', 'b', TF_CONFIG='{"task": 1}')
  assert result.returncode == 7
  assert seen['argv'] == [os.path.join(probe_dir, 'probe_main.py'), '7', 'b']
  assert seen['name'] == '__main__'
  assert seen['cwd'] == probe_dir and seen['path0'] == probe_dir
  assert seen['tf_config'] == '{"task": 1}'
  assert seen['own_session']
  assert result.stderr.strip().splitlines()[-1] == 'to stderr'
  # Forked from the server (TensorFlow already imported), not started by this process.
  assert seen['ppid'] != os.getpid() and seen['tensorflow_loaded']


def test_script_child_gets_its_folder_as_path0(probe_dir, tmp_path):
  script = os.path.join(probe_dir, 'probe_main.py')
  result = fork_server.run([sys.executable, script, '0'], cwd=str(tmp_path.parent), env=_env(),
                           capture_output=True, text=True, timeout=120)
  seen = json.loads(result.stdout.splitlines()[0])
  assert result.returncode == 0
  assert seen['argv'] == [script, '0'] and seen['path0'] == probe_dir


def test_each_child_draws_its_own_numpy_seed(probe_dir):
  draws = {_run_probe(probe_dir, '0')[1]['draw'] for _ in range(3)}
  assert len(draws) == 3


def test_signals_reach_the_child_and_its_code_is_negative(probe_dir, tmp_path):
  log_path = str(tmp_path / 'probe.log')
  with open(log_path, 'wb') as log:
    process = fork_server.popen([sys.executable, '-u', '-m', 'probe_main', '0', '--sleep'],
                                cwd=probe_dir, env=_env(), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
  assert isinstance(process, fork_server.ForkedProcess)
  deadline = time.time() + 60
  while 'to stderr' not in open(log_path).read():  # printed line by line, before the sleep
    assert process.poll() is None and time.time() < deadline, open(log_path).read()
    time.sleep(0.05)
  with pytest.raises(subprocess.TimeoutExpired):
    process.wait(timeout=0.2)
  cpu_before = fork_server.reaped_cpu_seconds()
  os.killpg(process.pid, signal.SIGTERM)
  assert process.wait(timeout=30) == -signal.SIGTERM
  assert process.poll() == -signal.SIGTERM
  assert fork_server.reaped_cpu_seconds() > cpu_before


def test_run_timeout_kills_the_child_and_raises(probe_dir):
  started = time.time()
  with pytest.raises(subprocess.TimeoutExpired) as raised:
    fork_server.run([sys.executable, '-u', '-m', 'probe_main', '0', '--sleep'], cwd=probe_dir,
                    env=_env(), capture_output=True, text=True, timeout=10)
  assert time.time() - started < 60
  assert 'to stderr' in raised.value.stderr
  seen = json.loads(raised.value.stdout.splitlines()[0])
  with pytest.raises(ProcessLookupError):
    os.kill(seen['pid'], 0)


def test_a_long_temporary_folder_still_gives_a_socket_path_that_binds(tmp_path, monkeypatch):
  # bazel's TMPDIR can pass the 107 bytes a Unix socket path may have.
  long_folder = tmp_path / ('x' * 100)
  long_folder.mkdir()
  monkeypatch.setattr(tempfile, 'tempdir', str(long_folder))
  server = fork_server.ForkServer(_env())
  try:
    server._connect().close()  # noqa: SLF001  (listening is what the test checks)
  finally:
    server.stop()


@pytest.mark.parametrize('variable', ['TF_CPP_MIN_LOG_LEVEL', 'SLIMTRAIN_DISABLE_COMPAT'])
def test_other_import_time_variables_never_share_a_server(probe_dir, variable):
  # TensorFlow reads the first when it is imported, core.compat the second.
  default_server = _run_probe(probe_dir, '0')[1]['ppid']
  result, seen = _run_probe(probe_dir, '0', **{variable: '1'})
  assert result.returncode == 0
  # Forked by a server imported under that value (or started plainly when this
  # process already runs fork_server.MAX_SERVERS servers).
  assert seen['ppid'] != default_server


@pytest.mark.parametrize('change', [
    dict(env={fork_server.DISABLE_ENV: '0'}),
    dict(stdout=subprocess.PIPE),
    dict(start_new_session=False),
    dict(args=['-c', 'print(1)']),
    dict(preexec_fn=os.getpid),
])
def test_a_child_that_could_differ_is_a_plain_popen(probe_dir, change):
  args = change.pop('args', ['-u', '-m', 'probe_main', '0'])
  options = dict(cwd=probe_dir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 start_new_session=True)
  options.update(change)
  options['env'] = _env(**change.get('env', {}))
  process = fork_server.popen([sys.executable] + args, **options)
  assert isinstance(process, subprocess.Popen)
  process.communicate(timeout=120)
  assert process.returncode == 0


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
