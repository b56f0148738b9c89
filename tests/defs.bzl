"""The py_test macro every test file under tests/ is declared with."""

def slimtrain_py_test(name, deps = [], data = [], size = "medium", tags = [], timeout = None):
    """A py_test for tests/<dir>/<name>.py that runs the file as __main__.

    Each test file ends with `tf.test.main()` or `sys.exit(pytest.main(...))`,
    so the same file runs under pytest and under bazel.
    """
    native.py_test(
        name = name,
        srcs = [name + ".py"],
        main = name + ".py",
        python_version = "PY3",
        srcs_version = "PY3",
        deps = ["//:slimtrain", "//tests:test_util"] + deps,
        data = data,
        size = size,
        tags = tags,
        timeout = timeout,
    )
