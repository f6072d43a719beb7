"""Lesson 05's checkers explain wrong answers: each case asserts the sentence the learner reads.

tests/test_exercises.py runs every solution, the unattempted answer, answers of the wrong kind and the hints;
tests/test_exercises_capstone.py the capstone (05.2).
"""


import keras
from test_exercises import not_yet as _not_yet  # the shared checks
from test_exercises import notebook_snippet


def test_05_1_the_blogs_class_word_for_word():
    """The notebook's class, unchanged: its positional period lands in save_freq, a save after every batch."""
    blog = notebook_snippet("05.1")["BlogParallelModelCheckpoint"]
    _not_yet("05.1", blog, "6 saves in 2 epochs of 3 batches", "7th parameter, save_freq", "by keyword")


def test_05_1_other_wrong_classes():
    class SavesTheWrapper(keras.callbacks.ModelCheckpoint):          # keywords right, set_model forgotten
        def __init__(self, model, filepath, monitor="val_loss"):
            super().__init__(filepath, monitor=monitor)

    _not_yet("05.1", SavesTheWrapper, "the template was never saved", "self.single_model")

    class NotACallback:
        pass

    _not_yet("05.1", NotACallback, "must still be a Keras callback")

    class NoTemplateArgument(keras.callbacks.ModelCheckpoint):       # the blog's signature lost
        def __init__(self, filepath):
            super().__init__(filepath)

    _not_yet("05.1", NoTemplateArgument, "NoTemplateArgument(template, 'template.keras') failed to train 2 epochs",
             "TypeError")
