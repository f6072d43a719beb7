"""Error 1 of the blog (January 2018): a model with BatchNormalization through multi_gpu_model.

Run inside the time capsule (Python 3.6, TensorFlow 1.3.0, Keras 2.1.3). Expected to crash with
ValueError: Variable batch_normalization_1/moving_mean/biased already exists, disallowed. ...
"""
from __future__ import print_function

import tensorflow as tf
from keras.layers import BatchNormalization, Dense
from keras.models import Sequential
from keras.utils import training_utils
from keras.utils.training_utils import multi_gpu_model  # the blog's import

from capsule_common import prepare

prepare(training_utils)  # versions, faked GPUs

with tf.device("/cpu:0"):  # the template model lives on the CPU, as the Keras docs advised
    model = Sequential([Dense(16, activation="relu", input_shape=(8,)),
                        BatchNormalization(),
                        Dense(10, activation="softmax")])
print("template model built; variables:", len(tf.global_variables()))
print("calling multi_gpu_model(model, gpus=2) ...")
parallel_model = multi_gpu_model(model, gpus=2)  # crashes on TF 1.3 + Keras 2.1.3
print("multi_gpu_model returned; shadow variables:",
      sorted(v.op.name for v in tf.global_variables() if "biased" in v.op.name))
