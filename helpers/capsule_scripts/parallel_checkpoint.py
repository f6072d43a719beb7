"""The blog's fix for error 2: a ModelCheckpoint that saves the template model instead.

Run inside the time capsule (Python 3.6, TensorFlow 1.3.0, Keras 2.1.3). The class is the one
from the blog (and keras-team/keras#10218), unchanged.
"""
from __future__ import print_function

import os

import tensorflow as tf
from keras.callbacks import ModelCheckpoint
from keras.layers import Dense
from keras.models import Sequential, load_model
from keras.optimizers import Adam
from keras.utils import training_utils
from keras.utils.training_utils import multi_gpu_model

from capsule_common import prepare


class ParallelModelCheckpoint(ModelCheckpoint):
    def __init__(self, model, filepath, monitor='val_loss', verbose=0,
                 save_best_only=False, save_weights_only=False,
                 mode='auto', period=1):
        self.single_model = model
        super(ParallelModelCheckpoint, self).__init__(filepath, monitor, verbose, save_best_only,
                                                      save_weights_only, mode, period)

    def set_model(self, model):
        super(ParallelModelCheckpoint, self).set_model(self.single_model)


(x_train, y_train), (x_test, y_test) = prepare(training_utils)  # versions, faked GPUs, data

with tf.device("/cpu:0"):
    model = Sequential([Dense(16, activation="relu", input_shape=(8,)), Dense(10, activation="softmax")])
parallel_model = multi_gpu_model(model, gpus=2)
parallel_model.compile(loss="categorical_crossentropy", optimizer=Adam(), metrics=["accuracy"])
checkpoint = ParallelModelCheckpoint(model, filepath="./cifar10_resnet_ckpt.h5", monitor="val_acc",
                                     verbose=1, save_best_only=True)
parallel_model.fit(x_train, y_train, batch_size=32, epochs=2, validation_data=(x_test, y_test),
                   verbose=0, callbacks=[checkpoint])
print("checkpoint written:", os.path.exists("cifar10_resnet_ckpt.h5"))
restored = load_model("cifar10_resnet_ckpt.h5")
print("reloaded the template model: %d layers %s, optimizer: %s" % (
    len(restored.layers), [layer.__class__.__name__ for layer in restored.layers],
    getattr(restored, "optimizer", None)))
