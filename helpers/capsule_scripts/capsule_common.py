"""Shared lines of the time-capsule scripts (Python 3.6 + TensorFlow 1.3.0 + Keras 2.1.3).

These scripts run in the capsule interpreter, not in the course's Python 3.11:
keep them Python 3.6 syntax and 2017-era APIs. helpers/capsule.py starts them.
"""
from __future__ import print_function

import platform
import warnings

warnings.filterwarnings("ignore", category=FutureWarning)


def banner():
    """Print the line helpers.capsule parses: interpreter and library versions."""
    import keras
    import tensorflow as tf
    print("capsule versions: python %s | tensorflow %s | keras %s"
          % (platform.python_version(), tf.__version__, keras.__version__))


def fake_gpus(training_utils, n=2):
    """Let multi_gpu_model's device check pass on a machine without GPUs.

    The TensorFlow 1.3.0 wheel in the capsule is CPU-only, so the check in
    multi_gpu_model would stop with "we expect the following devices to be
    available: ['/cpu:0', '/gpu:0', '/gpu:1']". We replace the function that lists
    devices. Keras 2 opens its session with allow_soft_placement=True, so ops pinned
    to '/gpu:N' quietly run on the CPU: the graph is the same as on 2 GPUs.
    """
    names = ["/device:CPU:0"] + ["/device:GPU:%d" % i for i in range(n)]
    training_utils._get_available_devices = lambda: list(names)
    print("note: CPU-only machine, multi_gpu_model's device check faked: %s" % names)


def blog_data(seed=0):
    """Small random stand-ins for the blog's (x_train, y_train), (x_test, y_test), one-hot labels."""
    import numpy as np
    from keras.utils import to_categorical
    np.random.seed(seed)
    x_train, y_train = np.random.rand(96, 8), to_categorical(np.random.randint(0, 10, 96), 10)
    x_test, y_test = np.random.rand(32, 8), to_categorical(np.random.randint(0, 10, 32), 10)
    return (x_train, y_train), (x_test, y_test)


def prepare(training_utils, n=2):
    """What every 2017 script does first: print the versions, fake the GPUs, return the data."""
    banner()
    fake_gpus(training_utils, n)
    return blog_data()
