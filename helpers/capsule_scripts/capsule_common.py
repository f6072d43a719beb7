"""Shared lines of the time-capsule scripts: Python 3.6 + TensorFlow 1.3.0 + Keras 2.1.3 (keep 2017 syntax)."""
from __future__ import print_function

import platform
import warnings

warnings.filterwarnings("ignore", category=FutureWarning)


def prepare(training_utils, n=2):
    """What every 2017 script does first: print the versions, fake n GPUs, return the blog's data.

    The capsule's TensorFlow 1.3.0 is CPU-only, so multi_gpu_model's device check gets a faked device
    list; Keras 2's session has allow_soft_placement=True, so ops pinned to '/gpu:N' run on the CPU and
    the graph is the one a 2-GPU machine builds.  The data: small random (x_train, y_train), (x_test, y_test).
    """
    import keras
    import numpy as np
    import tensorflow as tf
    from keras.utils import to_categorical
    print("capsule versions: python %s | tensorflow %s | keras %s"   # the line helpers.capsule parses
          % (platform.python_version(), tf.__version__, keras.__version__))
    names = ["/device:CPU:0"] + ["/device:GPU:%d" % i for i in range(n)]
    training_utils._get_available_devices = lambda: list(names)
    print("note: CPU-only machine, multi_gpu_model's device check faked: %s" % names)
    np.random.seed(0)
    x_train, y_train = np.random.rand(96, 8), to_categorical(np.random.randint(0, 10, 96), 10)
    x_test, y_test = np.random.rand(32, 8), to_categorical(np.random.randint(0, 10, 32), 10)
    return (x_train, y_train), (x_test, y_test)
