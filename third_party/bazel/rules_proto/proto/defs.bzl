"""Offline stand-in for @rules_proto: forwards to Bazel's native proto rule."""

def proto_library(**kwargs):
    native.proto_library(**kwargs)
