"""Installs slimtrain; compiles protos/*.proto to *_pb2.py while building."""

import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

_ROOT = os.path.dirname(os.path.abspath(__file__))


class BuildPyWithProtos(build_py):
  """Compiles the protos into the source tree before the usual build_py."""

  def run(self):
    sys.path.insert(0, os.path.join(_ROOT, 'protos'))
    import compile_protos  # pylint: disable=import-outside-toplevel
    compile_protos.compile_all()
    super().run()


setup(
    name='slimtrain',
    version='0.1.0',
    description=('Distributed multi-GPU training in the TF-Slim model_deploy / '
                 'Object Detection legacy-trainer lineage, on TensorFlow 2.21'),
    python_requires='>=3.11',
    # `trainer.estimator` (the estimator package's old address) is an import alias
    # that trainer/__init__.py keeps, not a package of its own.
    packages=['protos', 'deployment', 'core', 'builders', 'models', 'trainer',
              'estimator', 'estimator.canned', 'estimator.export', 'tools', 'utils'],
    package_data={'protos': ['*.proto']},
    install_requires=[
        # GPU users: pip install 'tensorflow[and-cuda]==2.21.*' first.
        'tensorflow==2.21.*',
        'tf-slim==1.1.0',
        'tf-keras==2.21.*',
        'numpy',
        'protobuf',
        'absl-py',
        'pycocotools',
        # Class names and scores drawn on the evaluator's and the demo's pictures.
        'Pillow',
        # deployment/tfjob.py writes and reads Kubernetes manifests.
        'pyyaml',
    ],
    extras_require={
        # grpcio-tools: the Makefile recompiles protos in place for the editable checkout.
        # jsonschema: tests/deployment/k8s_schema.py checks manifests against the Kubernetes
        # schemas; kubernetes-validate ships those schemas (tools/strip_k8s_schemas.py).
        'test': ['pytest', 'pytest-xdist', 'ruff', 'grpcio-tools', 'pandas', 'jsonschema',
                 'kubernetes-validate'],
        # tfe.inputs.pandas_input_fn.
        'pandas': ['pandas'],
    },
    cmdclass={'build_py': BuildPyWithProtos},
)
