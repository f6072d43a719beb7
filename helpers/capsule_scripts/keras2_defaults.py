"""Keras 2's numbers, for the defaults that changed: recorded once, compared with today's Keras by a test.

Run inside the time capsule (Python 3.6, TensorFlow 1.3.0, Keras 2.1.3). It prints one JSON line that
tests/test_keras2_script.py reads from the recorded transcript:
- an LSTM and a GRU with fixed weights on a fixed input (Keras 2's hard_sigmoid gates, reset-before GRU);
- three steps of each optimizer with its defaults on a constant gradient of 1e-3 (rates, epsilons);
- the Tokenizer on three texts (what it keeps of "don't", what it does with a word it never saw);
- a Dropout layer through multi_gpu_model on 2 towers: each tower draws its own mask.
"""
from __future__ import print_function

import json

import numpy as np
from keras import backend as K
from keras import optimizers
from keras.layers import GRU, LSTM, Dense, Dropout, Input
from keras.models import Model, Sequential
from keras.preprocessing.text import Tokenizer
from keras.utils import training_utils
from keras.utils.training_utils import multi_gpu_model

from capsule_common import prepare

prepare(training_utils)  # versions, faked GPUs
numbers = {}

x = (np.arange(2 * 3 * 2, dtype="float32").reshape(2, 3, 2) - 5) / 4
for name, cls in (("LSTM", LSTM), ("GRU", GRU)):
    inputs = Input((3, 2))
    layer = cls(3)
    model = Model(inputs, layer(inputs))
    layer.set_weights([((np.arange(w.size, dtype="float32").reshape(w.shape) % 7) - 3) / 5
                       for w in layer.get_weights()])
    numbers[name] = {"shapes": [list(w.shape) for w in layer.get_weights()], "output": model.predict(x).tolist()}
numbers["hard_sigmoid(1.0)"] = float(K.eval(K.hard_sigmoid(K.constant(1.0))))

for name in ("SGD", "RMSprop", "Adagrad", "Adadelta", "Adam", "Adamax", "Nadam"):
    inputs = Input((1,))
    dense = Dense(1, use_bias=False, kernel_initializer="ones")
    model = Model(inputs, dense(inputs))
    optimizer = getattr(optimizers, name)()
    model.compile(optimizer, loss=lambda y_true, y_pred: 1e-3 * K.mean(y_pred))   # the weight's gradient: 1e-3
    weights = []
    for _ in range(3):
        model.train_on_batch(np.ones((1, 1), "float32"), np.zeros((1, 1), "float32"))
        weights.append(float(dense.get_weights()[0][0, 0]))
    numbers[name] = {"lr": float(K.get_value(optimizer.lr)), "weights": weights}

tokenizer = Tokenizer(num_words=10)
tokenizer.fit_on_texts(["Don't stop, don't!", "stop it"])
numbers["Tokenizer"] = {"word_index": tokenizer.word_index,
                        "sequences": tokenizer.texts_to_sequences(["don't stop unknown"])}

template = Sequential([Dropout(0.5, input_shape=(64,))])
parallel = multi_gpu_model(template, gpus=2)
masks = K.function([parallel.input, K.learning_phase()], [parallel.output])([np.ones((4, 64)), 1])[0] > 0
numbers["multi_gpu_model dropout"] = {"tower 0 row 0 == tower 1 row 0": bool((masks[0] == masks[2]).all()),
                                      "entries dropped": masks.size - int(masks.sum())}
print("keras 2 numbers: " + json.dumps(numbers, sort_keys=True))
