"""Task processes forked from one that has already imported TensorFlow.

Each cluster test starts three or more `python -u -m trainer.train ...`
processes, and each fresh interpreter spends about 6 s of CPU importing
TensorFlow, tf_slim and tf_keras before it reaches anything the test checks;
on two cores that import was the largest single cost of the suite
(docs/developing.md, "Where the suite's time goes"). The fork server imports
them once, then forks one child per requested process. The child is a real,
separate process: its own pid, session and TensorFlow runtime (the server
never builds a graph, opens a session or starts a gRPC server, so nothing of
TF's runtime exists before the fork). It is set up as `python -u -m module
args` would be: argv, environment, working directory, stdin/stdout/stderr,
sys.path[0], and a fresh numpy seed. The program under test runs unchanged.

    from tests import fork_server

    process = fork_server.popen(
        [sys.executable, '-u', '-m', 'trainer.train', '--train_dir=/tmp/x'],
        cwd=REPO_ROOT, env=task_env, stdout=log_file, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, start_new_session=True)
    process.wait(timeout=60)   # pid, poll, wait, returncode, send_signal,
                               # terminate, kill: as subprocess.Popen

`popen` gives a plain `subprocess.Popen` whenever a forked child could differ
from a fresh interpreter: another interpreter or command shape than `python
[-u] (-m module | script) args`, an output pipe, a `preexec_fn`, or no
`start_new_session` (the child could not share the caller's group). A child
whose environment differs in a variable read at import (`IMPORT_TIME_VARIABLES`:
TF's log level, the visible GPUs, our compat switches, ...) is forked by a
server imported under that environment. `SLIMTRAIN_TEST_FORK_SERVER=0` turns
it all off (to compare, or to rule it out).

Differs from `subprocess.Popen` on purpose:
- the child's parent is the server, which reaps it and sends its exit code
  (negative for a signal, as Popen) and CPU seconds over a Unix socket;
  `reaped_cpu_seconds()` adds those up for tests/cpu_seconds.py;
- `ps` and /proc/PID/cmdline show a child as the server's command line
  (`python -m tests.fork_server SOCKET`): fork does not change them;
- a server per test process and import-time environment (at most
  `MAX_SERVERS`), started on first use (its own import, about 6 s, is paid
  once) and stopped at exit or when its parent dies.
"""

import atexit
import json
import os
import select
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

DISABLE_ENV = 'SLIMTRAIN_TEST_FORK_SERVER'

# A child's environment may differ from the server's only outside these:
# each is read while the preloaded modules import (TF's C++ logging level,
# the visible GPUs, the Keras version TF picks, our compat switches, the
# interpreter's own settings), so a difference needs a fresh interpreter.
IMPORT_TIME_VARIABLES = ('PYTHON', 'TF_', 'CUDA', 'KERAS', 'SLIMTRAIN_', 'OMP_', 'MKL',
                         'LD_', 'GRPC_', 'XLA_', 'NCCL', 'HOME')
# Read at run time, never at import.
RUN_TIME_VARIABLES = ('TF_CONFIG', 'PYTHONUNBUFFERED', DISABLE_ENV,
                      # tests/compat/shipped_plugin.py's per-run files.
                      'SLIMTRAIN_SHIPPED_REPORT', 'SLIMTRAIN_SHIPPED_XFAIL')
PRELOADED_MODULES = ('numpy', 'tensorflow', 'core.compat', 'tf_slim', 'absl.app',
                     'google.protobuf.text_format')

_LENGTH = struct.Struct('!I')
# Each server holds an imported TensorFlow (about 0.4 GB). A test process
# (one xdist worker runs many files) needs up to three environments: the
# cluster tasks' and benchmarks', the shipped tf-slim tests', and one more.
MAX_SERVERS = 3

_lock = threading.Lock()
_servers = {}
_reaped_cpu_seconds = 0.0


def reaped_cpu_seconds():
  """User + system CPU seconds of the forked children reaped so far."""
  return _reaped_cpu_seconds


def import_time_environment(env):
  """The part of `env` a forked child must share with the server."""
  return {k: v for k, v in env.items()
          if k.startswith(IMPORT_TIME_VARIABLES) and k not in RUN_TIME_VARIABLES}


def popen(args, cwd=None, env=None, stdin=None, stdout=None, stderr=None,
          start_new_session=False, **others):
  """Starts `args` as `subprocess.Popen` would, forked from the server when it can.

  Args:
    args: the command, a list starting with the interpreter.
    cwd, env, stdin, stdout, stderr, start_new_session: as `subprocess.Popen`.
    **others: further `subprocess.Popen` options; any of them means a plain Popen.

  Returns:
    A `ForkedProcess`, or a `subprocess.Popen` when forking could differ.
  """
  env = dict(os.environ if env is None else env)
  target = _fork_target(args)
  forkable = not (others or target is None or not start_new_session
                  or subprocess.PIPE in (stdin, stdout, stderr)
                  or os.environ.get(DISABLE_ENV, '1') == '0' or env.get(DISABLE_ENV, '1') == '0')
  server = _shared_server(env) if forkable else None
  if server is None:
    return subprocess.Popen(args, cwd=cwd, env=env, stdin=stdin, stdout=stdout, stderr=stderr,
                            start_new_session=start_new_session, **others)
  return server.start(args, target, cwd or os.getcwd(), env, (stdin, stdout, stderr),
                      unbuffered=args[1] == '-u')


def run(args, cwd=None, env=None, timeout=None, capture_output=False, stdout=None,
        stderr=None, text=False, check=False, **others):
  """`subprocess.run` for our own programs, forked from the server when it can.

  Captured output goes through temporary files, so a chatty child never
  blocks on a pipe. The child runs in its own session; on `timeout` the whole
  session is killed and `subprocess.TimeoutExpired` raised, as `subprocess.run`
  does for the child alone. Use it only for programs that import slimtrain's
  packages first: the server has already applied core.compat, which such a
  program would do anyway, and a plain TensorFlow program would not.

  Args:
    args, cwd, env, timeout, capture_output, stdout, stderr, text, check: as
      `subprocess.run` (stdin is /dev/null).
    **others: further `subprocess.run` options; any of them means a plain run.

  Returns:
    A `subprocess.CompletedProcess`.
  """
  if others:
    return subprocess.run(args, cwd=cwd, env=env, timeout=timeout, capture_output=capture_output,
                          stdout=stdout, stderr=stderr, text=text, check=check, **others)
  if capture_output:
    stdout = stderr = subprocess.PIPE
  with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
    targets = [out_file if stdout == subprocess.PIPE else stdout,
               err_file if stderr == subprocess.PIPE else stderr]
    process = popen(args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=targets[0],
                    stderr=targets[1], start_new_session=True)
    try:
      process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      _kill_session(process)
      raise subprocess.TimeoutExpired(args, timeout, *_read_back(
          stdout, stderr, out_file, err_file, text)) from None
    captured = _read_back(stdout, stderr, out_file, err_file, text)
  result = subprocess.CompletedProcess(args, process.returncode, *captured)
  if check:
    result.check_returncode()
  return result


def _kill_session(process):
  try:
    os.killpg(process.pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  process.wait()


def _read_back(stdout, stderr, out_file, err_file, text):
  """(stdout, stderr) as `subprocess.run` returns them: captured ones, else None."""
  captured = []
  for wanted, file in ((stdout, out_file), (stderr, err_file)):
    if wanted != subprocess.PIPE:
      captured.append(None)
      continue
    file.seek(0)
    data = file.read()
    captured.append(data.decode('utf-8', errors='replace') if text else data)
  return captured


def _fork_target(args):
  """('module', name) or ('script', path) for `python [-u] -m name ...`, else None."""
  args = list(args)
  if not args or args[0] != sys.executable:
    return None
  rest = args[2:] if args[1:2] == ['-u'] else args[1:]
  if len(rest) >= 2 and rest[0] == '-m':
    return ('module', rest[1])
  if rest and not rest[0].startswith('-') and rest[0].endswith('.py'):
    return ('script', rest[0])
  return None


def _shared_server(env):
  """The server for `env`'s import-time variables, started on first use.

  Returns:
    None when `MAX_SERVERS` already run for other import-time environments.
  """
  key = tuple(sorted(import_time_environment(env).items()))
  with _lock:
    if key not in _servers:
      if len(_servers) >= MAX_SERVERS:
        return None
      _servers[key] = ForkServer(env)
      atexit.register(_servers[key].stop)
    return _servers[key]


class ForkServer(object):
  """The client's handle on one server process."""

  def __init__(self, env):
    """Starts a server that imports `PRELOADED_MODULES` under `env`."""
    self.import_time_env = import_time_environment(env)
    # A Unix socket's path has at most 107 bytes; bazel's TMPDIR can be longer.
    short_enough = len(tempfile.gettempdir()) <= 60
    self._folder = tempfile.mkdtemp(prefix='slimtrain-fork-server-',
                                    dir=None if short_enough else '/tmp')
    self._socket_path = os.path.join(self._folder, 'socket')
    server_env = dict(env)
    server_env.pop('TF_CONFIG', None)
    # Its own output (import warnings, a traceback if it fails) goes to a file
    # of its own: the fds of whichever test started it are captured by pytest.
    self._log_path = os.path.join(self._folder, 'server.log')
    with open(self._log_path, 'wb') as log:
      self._process = subprocess.Popen(
          [sys.executable, '-m', 'tests.fork_server', self._socket_path],
          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), env=server_env,
          stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

  def _log_tail(self):
    with open(self._log_path, errors='replace') as log:
      return log.read()[-3000:]

  def _connect(self, timeout=300.0):
    """A connection, once the server has imported its modules and listens."""
    deadline = time.monotonic() + timeout
    while True:
      if self._process.poll() is not None:
        raise RuntimeError('the test fork server exited with %s before listening on %s:\n%s' % (
            self._process.returncode, self._socket_path, self._log_tail()))
      try:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(self._socket_path)
        return connection
      except (FileNotFoundError, ConnectionRefusedError):
        connection.close()
      if time.monotonic() > deadline:
        raise RuntimeError('the test fork server did not listen within %.0f s:\n%s' % (
            timeout, self._log_tail()))
      time.sleep(0.05)

  def start(self, args, target, cwd, env, std, unbuffered):
    """Forks one child in a session of its own; returns its `ForkedProcess`."""
    fds, opened = _standard_fds(std)
    connection = self._connect()
    try:
      request = json.dumps({'target': target, 'argv': list(args), 'cwd': cwd, 'env': env,
                            'unbuffered': unbuffered}).encode()
      socket.send_fds(connection, [b'F'], fds)
      connection.sendall(_LENGTH.pack(len(request)) + request)
    finally:
      for fd in opened:
        os.close(fd)
    return ForkedProcess(args, connection)

  def stop(self):
    """Ends the server (its children are left to their owners)."""
    if self._process.poll() is None:
      self._process.stdin.close()
      try:
        self._process.wait(timeout=10)
      except subprocess.TimeoutExpired:
        self._process.kill()
        self._process.wait()
    shutil.rmtree(self._folder, ignore_errors=True)


def _standard_fds(std):
  """The child's fds 0-2 from Popen-style stdin/stdout/stderr; also those opened here."""
  fds, opened = [], []
  for index, value in enumerate(std):
    if value is None:
      fd = index
    elif value == subprocess.DEVNULL:
      fd = os.open(os.devnull, os.O_RDWR)
      opened.append(fd)
    elif value == subprocess.STDOUT and index == 2:
      fd = fds[1]
    elif isinstance(value, int):
      fd = value
    else:
      fd = value.fileno()
    fds.append(fd)
  return fds, opened


class ForkedProcess(object):
  """A child of the fork server, used like a `subprocess.Popen`."""

  def __init__(self, args, connection):
    self.args = args
    self.returncode = None
    self.stdin = self.stdout = self.stderr = None
    self._connection = connection
    self._received = b''
    self.pid = self._message(timeout=None)['pid']

  def _message(self, timeout):
    """The server's next message; None when none came within `timeout` seconds."""
    while b'\n' not in self._received:
      readable, _, _ = select.select([self._connection], [], [], timeout)
      if not readable:
        return None
      chunk = self._connection.recv(4096)
      if not chunk:
        raise RuntimeError('the test fork server closed the connection of %s' % (self.args,))
      self._received += chunk
    line, self._received = self._received.split(b'\n', 1)
    return json.loads(line)

  def _exited(self, timeout):
    global _reaped_cpu_seconds
    if self.returncode is None:
      message = self._message(timeout)
      if message is not None:
        self.returncode = message['exit']
        _reaped_cpu_seconds += message['cpu_seconds']
        self._connection.close()
    return self.returncode

  def poll(self):
    return self._exited(0)

  def wait(self, timeout=None):
    if self._exited(timeout) is None:
      raise subprocess.TimeoutExpired(self.args, timeout)
    return self.returncode

  def send_signal(self, sig):
    if self.poll() is None:
      os.kill(self.pid, sig)

  def terminate(self):
    self.send_signal(signal.SIGTERM)

  def kill(self):
    self.send_signal(signal.SIGKILL)


# ----- the server process -----------------------------------------------------


def _receive(connection):
  """One request: its JSON and the three fds that come with it."""
  _, fds, _, _ = socket.recv_fds(connection, 1, 3)
  header = _read_exactly(connection, _LENGTH.size)
  return json.loads(_read_exactly(connection, _LENGTH.unpack(header)[0])), fds


def _read_exactly(connection, size):
  data = b''
  while len(data) < size:
    chunk = connection.recv(size - len(data))
    if not chunk:
      raise EOFError('request cut short')
    data += chunk
  return data


def _send(connection, message):
  try:
    connection.sendall(json.dumps(message).encode() + b'\n')
  except OSError:
    pass  # the client went away; its child still gets reaped


def _serve(socket_path):
  """Forks a child per request; returns the child's request in the child only."""
  for name in PRELOADED_MODULES:
    __import__(name)
  listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  listener.bind(socket_path + '.new')
  listener.listen(64)
  os.rename(socket_path + '.new', socket_path)  # clients connect only once it listens
  wake_read, wake_write = os.pipe()
  os.set_blocking(wake_read, False)
  os.set_blocking(wake_write, False)
  signal.set_wakeup_fd(wake_write)
  signal.signal(signal.SIGCHLD, lambda *unused: None)
  events = selectors.DefaultSelector()
  events.register(listener, selectors.EVENT_READ)
  events.register(wake_read, selectors.EVENT_READ)
  events.register(sys.stdin, selectors.EVENT_READ)  # EOF: the client is gone
  children = {}
  while True:
    for key, _ in events.select():
      if key.fileobj is listener:
        connection, _ = listener.accept()
        request, fds = _receive(connection)
        pid = os.fork()
        if pid == 0:
          signal.set_wakeup_fd(-1)
          signal.signal(signal.SIGCHLD, signal.SIG_DFL)
          events.close()
          for open_socket in [listener, connection] + list(children.values()):
            open_socket.close()
          os.close(wake_read)
          os.close(wake_write)
          return request, fds
        for fd in fds:
          os.close(fd)
        _send(connection, {'pid': pid})
        children[pid] = connection
      elif key.fileobj is wake_read:
        while True:
          try:
            if not os.read(wake_read, 512):
              break
          except BlockingIOError:
            break
        _reap(children)
      else:
        return None


def _reap(children):
  """Sends each exited child's code and CPU seconds to its client."""
  while children:
    pid, status, usage = os.wait4(-1, os.WNOHANG)
    if pid == 0:
      return
    connection = children.pop(pid, None)
    if connection is not None:
      _send(connection, {'exit': os.waitstatus_to_exitcode(status),
                         'cpu_seconds': usage.ru_utime + usage.ru_stime})
      connection.close()


def _become(request, fds):
  """Turns this forked child into `python [-u] -m module args` of `request`."""
  os.setsid()  # popen forks only for start_new_session=True
  for target_fd, fd in enumerate(fds):
    os.dup2(fd, target_fd)
  for fd in set(fds) - {0, 1, 2}:
    os.close(fd)
  os.chdir(request['cwd'])
  os.environ.clear()
  os.environ.update(request['env'])
  if request['unbuffered'] or request['env'].get('PYTHONUNBUFFERED'):
    for stream in (sys.stdout, sys.stderr):
      stream.reconfigure(line_buffering=True, write_through=True)
  import numpy  # noqa: PLC0415  (preloaded)
  numpy.random.seed()  # a fresh interpreter draws its own seed
  kind, name = request['target']
  import runpy  # noqa: PLC0415
  if kind == 'module':
    sys.argv = [name] + request['argv'][request['argv'].index('-m') + 2:]
    sys.path[0] = request['cwd']
    runpy.run_module(name, run_name='__main__', alter_sys=True)
  else:
    sys.argv = request['argv'][request['argv'].index(name):]
    sys.path[0] = os.path.dirname(os.path.abspath(name))
    runpy.run_path(name, run_name='__main__')


if __name__ == '__main__':
  forked = _serve(sys.argv[1])
  if forked is not None:
    _become(*forked)
