"""Tests for core.paths: scheme paths stay remote, atomic writes, ram:// quirks.

No test here reaches a network: `gs://` paths are only taken apart, never
opened, and I/O on a scheme path uses a scheme no filesystem registers
(`nosuchfs://`), which TensorFlow refuses before touching anything.
"""

import os
import stat
import sys

import numpy as np
import pytest
import tensorflow as tf

from core import config_util
from core import label_map_util
from core import paths
from core import saved_model_writer
from protos import pipeline_pb2
from tools import create_shapes_tf_record
from trainer import eval_images
from trainer import exporter

tf.compat.v1.disable_eager_execution()


def _ram_root(tmp_path):
  """A ram:// directory no other test (or xdist worker) uses."""
  return 'ram://test_paths_%d_%s' % (os.getpid(), tmp_path.name)


def test_scheme_paths_are_never_made_local():
  assert paths.scheme('gs://bucket/run') == 'gs'
  assert paths.scheme('/data/run') == paths.scheme('run') == ''
  assert paths.absolute('gs://bucket/run') == 'gs://bucket/run'
  assert paths.absolute(b'gs://bucket/run') == 'gs://bucket/run'
  assert paths.join('gs://bucket', 'run', 'model.ckpt') == 'gs://bucket/run/model.ckpt'
  assert paths.parent('gs://bucket/run/model.ckpt') == 'gs://bucket/run'
  assert paths.parent('gs://bucket/run/') == 'gs://bucket'
  assert paths.parent('gs://bucket') == 'gs://bucket'
  assert paths.basename('gs://bucket/run/') == 'run'
  assert paths.temp_sibling('gs://bucket/run/7').startswith('gs://bucket/run/.7.tmp-')
  assert not paths.is_local('gs://bucket/run') and paths.is_local('file:///tmp/x')


def test_local_paths_behave_as_os_path(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert paths.absolute('run') == str(tmp_path / 'run')
  assert paths.join('a', 'b') == os.path.join('a', 'b')
  assert paths.parent(str(tmp_path / 'a' / 'b')) == str(tmp_path / 'a')


def test_only_local_disks_and_hdfs_rename_directories_atomically():
  assert paths.renames_directories('/tmp/x') and paths.renames_directories('hdfs://nn/x')
  assert not paths.renames_directories('gs://bucket/x')
  assert not paths.renames_directories('s3://bucket/x')
  assert not paths.renames_directories('ram://x')


def test_writers_refuse_an_unknown_filesystem_without_a_local_folder(tmp_path, monkeypatch):
  # Before core.paths, os.path.abspath / os.makedirs turned such a path into
  # ./nosuchfs:/bucket/... on the local disk.
  monkeypatch.chdir(tmp_path)
  remote = 'nosuchfs://bucket/run'
  config = pipeline_pb2.TrainEvalPipelineConfig()
  config.train_config.batch_size = 1
  config.model.ssd.num_classes = 1
  writers = [
      lambda: config_util.save_pipeline_config(config, remote),
      lambda: create_shapes_tf_record.create_shapes_dataset(remote, num_train=1, num_val=1),
      lambda: label_map_util.write_label_map(remote + '/label_map.pbtxt', ['a']),
      lambda: eval_images.write_png(remote + '/x.png', np.zeros([2, 2, 3], np.uint8)),
      lambda: saved_model_writer.write_atomically(remote + '/7', lambda staging: None),
      lambda: exporter.export_inference_graph(
          'image_tensor', config, remote + '/train', remote + '/export'),
  ]
  for write in writers:
    with pytest.raises((tf.errors.UnimplementedError, ValueError), match='nosuchfs'):
      write()
  assert os.listdir(tmp_path) == []


def test_write_file_atomically_replaces_whole_files_with_the_umask_mode(tmp_path):
  path = str(tmp_path / 'state.txt')
  previous = os.umask(0o027)
  try:
    paths.write_file_atomically(path, 'first')
    paths.write_file_atomically(path, b'second')
  finally:
    os.umask(previous)
  assert paths.read_text(path) == 'second'
  assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
  assert os.listdir(tmp_path) == ['state.txt']


def test_write_file_atomically_on_ram_filesystem(tmp_path):
  root = _ram_root(tmp_path)
  paths.makedirs(root)
  path = paths.join(root, 'pipeline.config')
  paths.write_file_atomically(path, 'a: 1\n')
  paths.write_file_atomically(path, 'a: 2\n')
  assert paths.read_text(path) == 'a: 2\n'
  assert tf.io.gfile.listdir(root) == ['pipeline.config']
  tf.io.gfile.rmtree(root)


def test_exists_and_isdir_ignore_ram_name_prefixes(tmp_path):
  root = _ram_root(tmp_path)
  paths.makedirs(root + '/train/empty')
  paths.write_file_atomically(root + '/train/model.ckpt-5.index', b'x')
  # tf.io.gfile itself answers "a directory" for any prefix of a name on ram://.
  assert tf.io.gfile.isdir(root + '/train/model.ckpt-5')
  assert not paths.exists(root + '/train/model.ckpt-5')
  assert not paths.isdir(root + '/train/model.ckpt-5')
  assert not paths.exists(root + '/train/mod')
  assert paths.exists(root + '/train/model.ckpt-5.index')
  assert not paths.isdir(root + '/train/model.ckpt-5.index')
  assert paths.isdir(root + '/train') and paths.isdir(root + '/train/empty/')
  assert not paths.exists(root + '/nothing')
  tf.io.gfile.rmtree(root)


def _write_export(staging_dir):
  paths.makedirs(paths.join(staging_dir, 'variables'))
  paths.write_file_atomically(paths.join(staging_dir, 'variables', 'variables.index'), b'i')
  paths.write_file_atomically(paths.join(staging_dir, 'saved_model.pb'), b'model')


def test_export_on_ram_filesystem_is_copied_whole_without_staging_left(tmp_path):
  base = _ram_root(tmp_path) + '/export'
  target = base + '/7'
  assert saved_model_writer.write_atomically(target, _write_export) == target
  assert tf.io.gfile.listdir(base) == ['7']
  assert sorted(tf.io.gfile.listdir(target)) == ['saved_model.pb', 'variables']
  assert paths.read_text(target + '/variables/variables.index') == 'i'
  assert paths.read_text(target + '/saved_model.pb') == 'model'
  tf.io.gfile.rmtree(paths.parent(base))


def test_failed_export_on_ram_filesystem_leaves_nothing(tmp_path):
  base = _ram_root(tmp_path) + '/export'
  paths.makedirs(base)

  def fail_halfway(staging_dir):
    paths.write_file_atomically(paths.join(staging_dir, 'saved_model.pb'), b'model')
    raise RuntimeError('disk full')

  with pytest.raises(RuntimeError, match='disk full'):
    saved_model_writer.write_atomically(base + '/8', fail_halfway)
  assert tf.io.gfile.listdir(base) == []
  tf.io.gfile.rmtree(paths.parent(base))


def test_copy_tree_copies_nested_files(tmp_path):
  source, target = tmp_path / 'source', str(tmp_path / 'target')
  (source / 'a' / 'b').mkdir(parents=True)
  (source / 'a' / 'b' / 'deep.txt').write_text('deep')
  (source / 'saved_model.pb').write_text('model')
  assert paths.copy_tree(str(source), target, last_names=('saved_model.pb',)) == 2
  assert paths.read_text(os.path.join(target, 'a', 'b', 'deep.txt')) == 'deep'
  assert paths.read_text(os.path.join(target, 'saved_model.pb')) == 'model'


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
