"""Loopback ports for local clusters: below the ephemeral range, never handed out twice."""

import json
import socket
import subprocess
import sys
import time

import pytest

from deployment import ports

_REPO_ROOT = __file__.rsplit('/tests/', 1)[0]


@pytest.fixture
def table_path(tmp_path, monkeypatch):
  path = str(tmp_path / 'reservations.json')
  monkeypatch.setattr(ports, 'RESERVATIONS_PATH', path)
  return path


def _only_candidate(monkeypatch, port):
  monkeypatch.setattr(ports, '_LOWEST_PORT', port)
  monkeypatch.setattr(ports, '_ephemeral_low', lambda: port + 1)


def _a_free_port():
  with socket.socket() as s:
    s.bind((ports.LOOPBACK, 0))
    return s.getsockname()[1]


def _read(path):
  with open(path) as f:
    return json.load(f)


def test_picks_lie_below_the_kernels_ephemeral_range_and_are_recorded(table_path):
  with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
    ephemeral_low = int(f.read().split()[0])
  picked = ports.pick_unused_ports(6)
  assert len(set(picked)) == 6
  assert all(10000 <= port < ephemeral_low for port in picked)
  assert sorted(int(port) for port in _read(table_path)) == sorted(picked)
  assert ports.pick_unused_ports(0) == []
  with pytest.raises(ValueError, match='count must be >= 0'):
    ports.pick_unused_ports(-1)


def test_parallel_processes_never_pick_the_same_port(table_path):
  # 4 x 40 random picks from ~22,000 ports would repeat one about half the
  # time without the shared table.
  picker = ('import sys; sys.path.insert(0, %r); from deployment import ports\n'
            'for _ in range(40): print(ports.pick_unused_ports(1)[0])' % _REPO_ROOT)
  env = {'SLIMTRAIN_PORT_RESERVATIONS': table_path, 'PATH': '/usr/bin:/bin'}
  processes = [subprocess.Popen([sys.executable, '-c', picker], env=env,
                                stdout=subprocess.PIPE, text=True) for _ in range(4)]
  picked = []
  for process in processes:
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 0
    picked += [int(line) for line in out.split()]
  assert len(picked) == 160 and len(set(picked)) == 160
  assert len(_read(table_path)) == 160


def test_a_reserved_port_returns_only_after_its_reservation_expires(table_path, monkeypatch):
  port = _a_free_port()
  _only_candidate(monkeypatch, port)
  with open(table_path, 'w') as f:
    json.dump({str(port): time.time() - ports.RESERVATION_SECS - 1}, f)
  assert ports.pick_unused_ports(1) == [port]
  with pytest.raises(RuntimeError, match=r'only 0 of 1 ports free .* reservations are in '):
    ports.pick_unused_ports(1)


def test_a_port_with_a_listener_is_not_picked(table_path, monkeypatch):
  listener = socket.socket()
  listener.bind((ports.LOOPBACK, 0))
  listener.listen()
  port = listener.getsockname()[1]
  _only_candidate(monkeypatch, port)
  with pytest.raises(RuntimeError, match='only 0 of 1 ports'):
    ports.pick_unused_ports(1)
  listener.close()
  assert ports.pick_unused_ports(1) == [port]


def test_a_torn_table_counts_as_empty_and_is_rewritten(table_path):
  with open(table_path, 'w') as f:
    f.write('{"2')
  picked = ports.pick_unused_ports(2)
  assert sorted(int(port) for port in _read(table_path)) == sorted(picked)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
