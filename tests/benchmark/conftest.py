"""The ``gpu`` marker: tests that need a CUDA device (skipped without one)."""


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped without one)")
