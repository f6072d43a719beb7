"""Lesson 05's checkers explain wrong answers: each case asserts the sentence the learner reads.

tests/test_exercises.py runs every solution, the unattempted answer, answers of the wrong kind and the hints.
"""


import keras
from test_exercises import not_yet as _not_yet  # the shared checks


def _lambda_capturing_a_module():
    import numpy as local_np  # a module captured by the closure below: multi_gpu_model's bug

    return keras.layers.Lambda(lambda t: t[: local_np.shape(t)[0] // 2])


def test_05_1_wrong_lambdas():
    _not_yet("05.1", _lambda_capturing_a_module(), "captures the module(s) ['numpy'] in its closure")
    _not_yet("05.1", keras.layers.Lambda(lambda t: t), "it should return the first 4 rows")

