"""Error 2 of the blog: ModelCheckpoint on the model returned by multi_gpu_model.

Run inside the time capsule (Python 3.6, TensorFlow 1.3.0, Keras 2.1.3). The model has no
BatchNormalization (on TF 1.3 error 1 would come first). Expected to crash in the first
checkpoint with: TypeError: can't pickle module objects
"""
from __future__ import print_function

import tensorflow as tf
from keras.callbacks import ModelCheckpoint
from keras.layers import Dense
from keras.models import Sequential
from keras.optimizers import Adam
from keras.utils import training_utils
from keras.utils.training_utils import multi_gpu_model  # the blog's import

from capsule_common import prepare

(x_train, y_train), (x_test, y_test) = prepare(training_utils)  # versions, faked GPUs, data

with tf.device("/cpu:0"):
    model = Sequential([Dense(16, activation="relu", input_shape=(8,)), Dense(10, activation="softmax")])
parallel_model = multi_gpu_model(model, gpus=2)
slicer = [layer for layer in parallel_model.layers if layer.__class__.__name__ == "Lambda"][0]
print("the slicing Lambda runs %s(); its free variables: %s -> %s" % (
    slicer.function.__name__, slicer.function.__code__.co_freevars,
    [type(c.cell_contents).__name__ for c in slicer.function.__closure__]))
parallel_model.compile(loss="categorical_crossentropy", optimizer=Adam(), metrics=["accuracy"])
checkpoint = ModelCheckpoint(filepath="./cifar10_resnet_ckpt.h5", monitor="val_acc", verbose=1,
                             save_best_only=True)  # the blog's callback
print("parallel_model.fit(..., callbacks=[checkpoint]) ...")
parallel_model.fit(x_train, y_train, batch_size=32, epochs=2, validation_data=(x_test, y_test),
                   verbose=0, callbacks=[checkpoint])
print("training finished")
