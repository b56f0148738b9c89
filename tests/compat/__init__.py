"""Tests of core.compat: tf_slim as slimtrain calls it, and tf-slim's own tests."""
