"""Every builder checks the type of its message first; the DeployConfig builder."""

import re
import sys

import pytest
import tensorflow as tf

from builders import anchor_generator_builder
from builders import box_coder_builder
from builders import box_predictor_builder
from builders import decoder_builder
from builders import deploy_config_builder
from builders import hyperparams_builder
from builders import image_resizer_builder
from builders import losses_builder
from builders import matcher_builder
from builders import model_builder
from builders import optimizer_builder
from builders import post_processing_builder
from builders import preprocessor_builder
from builders import region_similarity_calculator_builder
from protos import box_coder_pb2
from protos import input_reader_pb2
from protos import matcher_pb2
from protos import optimizer_pb2
from protos import pipeline_pb2
from protos import preprocessor_pb2
from protos import train_pb2

tf.compat.v1.disable_eager_execution()

_WRONG = train_pb2.TrainConfig()

_BUILDERS = [
    (lambda c: model_builder.build(c, is_training=True),
     'model_config not of type model_pb2.DetectionModel.'),
    (lambda c: model_builder.build_ssd(c, True), 'ssd_config not of type ssd_pb2.Ssd.'),
    (lambda c: model_builder.build_slim_classifier(c, True),
     'slim_classifier_config not of type model_pb2.SlimClassifier.'),
    (lambda c: model_builder.build_feature_extractor(c, True, 6),
     'feature_extractor_config not of type ssd_pb2.SsdFeatureExtractor.'),
    (image_resizer_builder.build,
     'image_resizer_config not of type image_resizer_pb2.ImageResizer.'),
    (box_coder_builder.build, 'box_coder_config not of type box_coder_pb2.BoxCoder.'),
    (matcher_builder.build, 'matcher_config not of type matcher_pb2.Matcher.'),
    (anchor_generator_builder.build,
     'anchor_generator_config not of type anchor_generator_pb2.AnchorGenerator'),
    (region_similarity_calculator_builder.build,
     'region_similarity_calculator_config not of type '
     'region_similarity_calculator_pb2.RegionsSimilarityCalculator'),
    (lambda c: box_predictor_builder.build(hyperparams_builder.build, c, True, 3),
     'box_predictor_config not of type box_predictor_pb2.BoxPredictor.'),
    (lambda c: hyperparams_builder.build(c, True),
     'hyperparams_config not of type hyperparams_pb.Hyperparams.'),
    (losses_builder.build, 'loss_config not of type losses_pb2.Loss.'),
    (losses_builder.build_classification_loss,
     'loss_config not of type losses_pb2.ClassificationLoss.'),
    (losses_builder.build_localization_loss,
     'loss_config not of type losses_pb2.LocalizationLoss.'),
    (lambda c: losses_builder.build_hard_example_miner(c, 1.0, 1.0),
     'hard_example_miner_config not of type losses_pb2.HardExampleMiner.'),
    (post_processing_builder.build,
     'post_processing_config not of type post_processing_pb2.Postprocessing.'),
]


@pytest.mark.parametrize('build, message', _BUILDERS,
                         ids=[message.split()[0] for _, message in _BUILDERS])
def test_model_sub_builders_reject_another_message(build, message):
  with pytest.raises(ValueError, match='^%s$' % re.escape(message)):
    build(_WRONG)


def test_model_sub_builders_accept_their_message():
  assert box_coder_builder.build(box_coder_pb2.BoxCoder()) is not None
  assert matcher_builder.build(matcher_pb2.Matcher()) is not None


def test_other_builders_reject_another_message():
  with pytest.raises(ValueError, match=r'optimizer_config not of type optimizer_pb2\.Optimizer'):
    optimizer_builder.build(_WRONG)
  with pytest.raises(ValueError,
                     match=r'preprocessor_step_config not of type preprocessor_pb2\.'
                     r'PreprocessingStep'):
    preprocessor_builder.build(_WRONG)
  with pytest.raises(ValueError,
                     match=r'input_reader_config not of type input_reader_pb2\.InputReader'):
    decoder_builder.build(_WRONG)
  with pytest.raises(ValueError, match=r'deploy_config not of type pipeline_pb2\.DeployConfig'):
    deploy_config_builder.build(_WRONG)
  # Their own messages still build.
  assert preprocessor_builder.build(preprocessor_pb2.PreprocessingStep(
      random_horizontal_flip=preprocessor_pb2.RandomHorizontalFlip()))[0] is not None
  assert decoder_builder.build(input_reader_pb2.InputReader()) is not None
  with tf.Graph().as_default():
    config = optimizer_pb2.Optimizer()
    config.sgd_optimizer.learning_rate.constant_learning_rate.learning_rate = 0.5
    assert optimizer_builder.build(config)[0] is not None


def test_deploy_config_builds_clones_and_options():
  message = pipeline_pb2.DeployConfig(
      num_clones=3, clone_on_cpu=True, ps_strategy=pipeline_pb2.DeployConfig.GREEDY)
  settings = deploy_config_builder.build(message)
  assert settings == deploy_config_builder.DeploySettings(
      3, True, {'variable_update': 'parameter_server', 'ps_strategy': 'greedy'})


def test_deploy_config_flags_win_and_minus_one_means_one_per_gpu():
  message = pipeline_pb2.DeployConfig(num_clones=3, clone_on_cpu=True)
  settings = deploy_config_builder.build(message, num_clones=-1, clone_on_cpu=False)
  assert settings.num_clones == max(1, len(tf.config.list_physical_devices('GPU')))
  assert settings.clone_on_cpu is False
  with pytest.raises(ValueError, match='num_clones must be positive or -1'):
    deploy_config_builder.build(pipeline_pb2.DeployConfig(num_clones=0))


def test_deploy_config_cluster_timeouts_defaults_and_checks():
  timeouts = deploy_config_builder.cluster_timeouts(pipeline_pb2.DeployConfig())
  assert timeouts == deploy_config_builder.ClusterTimeouts(
      startup=600, chief=300, termination_grace=25, replica=300, recovery=300,
      snapshot_interval=5.0)
  message = pipeline_pb2.DeployConfig(termination_grace_secs=10, replica_timeout_secs=40,
                                      recovery_timeout_secs=50)
  timeouts = deploy_config_builder.cluster_timeouts(message)
  assert (timeouts.termination_grace, timeouts.replica, timeouts.recovery) == (10, 40, 50)
  with pytest.raises(ValueError, match=r'deploy_config\.replica_timeout_secs must be positive'):
    deploy_config_builder.cluster_timeouts(pipeline_pb2.DeployConfig(replica_timeout_secs=0))
  with pytest.raises(ValueError, match=r'deploy_config not of type pipeline_pb2\.DeployConfig'):
    deploy_config_builder.cluster_timeouts(_WRONG)


@pytest.mark.parametrize('value,expected', [(0, 0.0), (0.5, 0.5), (30, 30.0)])
def test_deploy_config_snapshot_interval_zero_turns_it_off_any_positive_value_is_taken(
    value, expected):
  message = pipeline_pb2.DeployConfig(snapshot_interval_secs=value)
  assert deploy_config_builder.cluster_timeouts(message).snapshot_interval == expected


@pytest.mark.parametrize('bad', [-1.0, float('nan'), float('inf')])
def test_deploy_config_snapshot_interval_negative_or_not_finite_is_refused_naming_it(bad):
  message = pipeline_pb2.DeployConfig(snapshot_interval_secs=bad)
  with pytest.raises(ValueError, match=r'deploy_config\.snapshot_interval_secs must be 0 '
                                       r'\(off\) or a positive number of seconds'):
    deploy_config_builder.cluster_timeouts(message)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
