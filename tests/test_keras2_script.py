"""The rest of a Keras 2 script: every Keras 2 idiom of lesson 03's two 2018 scripts and their kind, as it fails
(or is ignored, or computes something else) today.

Each test triggers one idiom on today's stack and prints what TensorFlow or Keras says, so the error-index check
(tools/pytest_course.py) finds every message of TROUBLESHOOTING's "The rest of a Keras 2 script" section in the
run. Where Keras 3.13 and 3.15 word a message differently, the index holds the stable part. The section's tables are
read from TROUBLESHOOTING.md and run row by row: the imports (both columns), the `K.*` functions (Keras 2's
implementation, still in `tf.keras.backend`, against `keras.ops`), the defaults (against Keras 2.1.3's own numbers,
recorded by the time capsule: helpers/capsule_scripts/keras2_defaults.py) and the multi_gpu_model recipe.
"""

import inspect
import json
import logging
import re
import warnings
from pathlib import Path

import error_index  # maintainer code: tools/error_index.py
import keras
import numpy as np
import pytest
import tensorflow as tf


def _said(exc_info_or_warning) -> str:
    """Print the message the way a traceback's last line shows it, and return it."""
    value = getattr(exc_info_or_warning, "value", exc_info_or_warning)
    text = f"{type(value).__name__}: {value}"
    print(text)
    return text


@pytest.fixture()
def model():
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return m


def _data(n=16):
    rng = np.random.default_rng(0)
    return rng.random((n, 4), dtype="float32"), np.arange(n) % 2


def test_imports_that_left():
    with pytest.raises(ImportError) as err:
        from keras.preprocessing.image import ImageDataGenerator  # noqa: F401
    assert "cannot import name 'ImageDataGenerator' from 'keras.preprocessing.image'" in _said(err)
    with pytest.raises(AttributeError) as err:
        keras.preprocessing.image.ImageDataGenerator  # noqa: B018
    assert "has no attribute 'ImageDataGenerator'" in _said(err)
    with pytest.raises(ImportError) as err:
        from keras.utils import np_utils  # noqa: F401
    assert "cannot import name 'np_utils' from 'keras.utils'" in _said(err)


@pytest.mark.parametrize("method", ["fit_generator", "evaluate_generator", "predict_generator"])
def test_generator_methods_are_gone_and_fit_takes_the_generator(model, method):
    with pytest.raises(AttributeError) as err:
        getattr(model, method)
    assert f"object has no attribute '{method}'" in _said(err)
    x, y = _data()

    def batches():                                  # a Keras 2 style generator that loops forever
        while True:
            yield x[:8], y[:8]

    assert len(model.fit(batches(), steps_per_epoch=2, epochs=1, shuffle=False, verbose=0).history["loss"]) == 1


@pytest.mark.parametrize("argument", ["workers", "use_multiprocessing", "max_queue_size"])
def test_fit_no_longer_takes_the_queue_arguments(model, argument):
    x, y = _data()
    with pytest.raises(TypeError) as err:
        model.fit(x, y, epochs=1, verbose=0, **{argument: 2})
    assert f"fit() got an unexpected keyword argument '{argument}'" in _said(err)


def test_pydataset_takes_them_instead(model):
    x, y = _data()

    class Batches(keras.utils.PyDataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return x[8 * i: 8 * i + 8], y[8 * i: 8 * i + 8]

    data = Batches(workers=2, use_multiprocessing=False, max_queue_size=4)
    assert len(model.fit(data, epochs=1, verbose=0).history["loss"]) == 1


def test_optimizer_lr_and_decay():
    with pytest.raises(ValueError) as err:
        keras.optimizers.Adam(lr=1e-3)
    assert "Argument(s) not recognized: {'lr': 0.001}" in _said(err)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        adam = keras.optimizers.Adam(learning_rate=1e-3, decay=1e-6)
    [decay] = [w for w in caught if "decay" in str(w.message)]
    assert "Argument `decay` is no longer supported and will be ignored." in _said(decay.message)
    assert float(adam.learning_rate) == pytest.approx(1e-3)      # the rate never decays


def test_decay_as_a_schedule_cannot_be_set_by_a_callback():
    """Keras 2's decay is lr / (1 + decay * step): InverseTimeDecay. But then callbacks cannot set the rate."""
    schedule = keras.optimizers.schedules.InverseTimeDecay(1e-3, decay_steps=1, decay_rate=0.5)
    assert float(schedule(2)) == pytest.approx(1e-3 / (1 + 0.5 * 2))
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
    m.compile(optimizer=keras.optimizers.Adam(schedule), loss="sparse_categorical_crossentropy")
    x, y = _data()
    with pytest.raises(TypeError) as err:
        m.fit(x, y, epochs=1, verbose=0, callbacks=[keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr)])
    assert "hence its learning rate is not settable" in _said(err)


def test_no_sessions():
    from keras import backend as K

    for name in ("get_session", "set_session"):
        with pytest.raises(AttributeError) as err:
            getattr(K, name)
        assert f"module 'keras.backend' has no attribute '{name}'" in _said(err)
    for name in ("ConfigProto", "Session"):
        with pytest.raises(AttributeError) as err:
            getattr(tf, name)
        assert f"module 'tensorflow' has no attribute '{name}'" in _said(err)


def test_history_keys_are_the_metric_names(model):
    x, y = _data()
    history = model.fit(x, y, validation_data=(x, y), epochs=1, verbose=0).history
    assert sorted(history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    with pytest.raises(KeyError) as err:
        history["val_acc"]  # noqa: B018
    assert _said(err) == "KeyError: 'val_acc'"


@pytest.mark.parametrize("callback, stopped, missing", [
    (keras.callbacks.ReduceLROnPlateau, "ReduceLROnPlateau callback received monitor=val_acc, but Keras isn't able "
                                        "to automatically determine",
     "Learning rate reduction is conditioned on metric `val_acc` which is not available."),
    (keras.callbacks.EarlyStopping, "EarlyStopping callback received monitor=val_acc, but Keras isn't able to "
                                    "automatically determine",
     "Early stopping conditioned on metric `val_acc` which is not available."),
])
def test_callbacks_on_val_acc(model, callback, stopped, missing):
    """mode='auto' (the default) stops fit; mode='max' warns every epoch and never acts."""
    x, y = _data()
    with pytest.raises(ValueError) as err:
        model.fit(x, y, validation_data=(x, y), epochs=1, verbose=0, callbacks=[callback(monitor="val_acc")])
    assert stopped in _said(err)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cb = callback(monitor="val_acc", mode="max", patience=0)
        model.fit(x, y, validation_data=(x, y), epochs=3, verbose=0, callbacks=[cb])
    said = [_said(w.message) for w in caught if "val_acc" in str(w.message)]
    assert len(said) == 3 and all(missing in s for s in said), said
    assert model.history.epoch == [0, 1, 2] and float(model.optimizer.learning_rate) == pytest.approx(1e-3)


def test_whole_model_h5_checkpoint_is_legacy(model, tmp_path, caplog):
    x, y = _data()
    with caplog.at_level(logging.WARNING):
        model.fit(x, y, validation_data=(x, y), epochs=1, verbose=0,
                  callbacks=[keras.callbacks.ModelCheckpoint(str(tmp_path / "best.h5"), monitor="val_accuracy",
                                                             save_best_only=True, save_weights_only=False)])
    legacy = [r.getMessage() for r in caplog.records if "HDF5" in r.getMessage()]
    print(*legacy, sep="\n")
    assert legacy and "This file format is considered legacy." in legacy[0]
    assert keras.models.load_model(tmp_path / "best.h5").count_params() == model.count_params()


def test_an_absolute_schedule_overwrites_the_plateau_and_the_scaling():
    """The 2018 pair: LearningRateScheduler(schedule(epoch)) sets the rate every epoch, so ReduceLROnPlateau's cut
    and a rate scaled for N replicas are both gone by the next epoch (no message). A schedule(epoch, lr) that
    multiplies the rate it is given keeps both. Lesson 03 shows the same on 2 replicas."""
    x, y = _data()

    def run(schedule):
        m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
        m.compile(optimizer=keras.optimizers.Adam(2e-3), loss="sparse_categorical_crossentropy")
        seen = []
        m.fit(x, y, epochs=4, verbose=0, callbacks=[
            keras.callbacks.LearningRateScheduler(schedule),
            keras.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=0, min_delta=10.0),
            keras.callbacks.LambdaCallback(on_epoch_begin=lambda e, logs: seen.append(float(m.optimizer.learning_rate)))])
        return seen

    np.testing.assert_allclose(run(lambda epoch: 1e-3), [1e-3] * 4, rtol=1e-6)
    np.testing.assert_allclose(run(lambda epoch, lr: lr * 0.1 if epoch == 3 else lr),
                               [2e-3, 2e-3, 1e-3, 5e-5], rtol=1e-6)   # cut after epochs 1 and 2, x0.1 at 3


# ---- the tables of TROUBLESHOOTING's "The rest of a Keras 2 script": every row, run ------------------------------

ROOT = Path(__file__).resolve().parent.parent
TROUBLESHOOTING = (ROOT / "TROUBLESHOOTING.md").read_text(encoding="utf-8")


def table(heading: str, which: int = 0) -> list[list[str]]:
    """The rows (header and rule left out) of the ``which``-th markdown table under ``### {heading}``, as cells."""
    section = TROUBLESHOOTING.split(f"\n### {heading}\n", 1)[1].split("\n### ", 1)[0]
    tables = re.findall(r"((?:^\|.*\|\n)+)", section + "\n", re.M)
    rows = [ln.strip().strip("|").split(" | ") for ln in tables[which].splitlines()]
    return [[cell.strip() for cell in row] for row in rows[2:]]


def first_code(cell: str) -> str:
    """The first backticked span of a table cell (the code, before any comment in parentheses)."""
    found = re.findall(r"`([^`]+)`", cell)
    return found[0] if found else ""


IMPORT_ROWS = table("Keras 2 import paths")


def test_the_tables_are_there():
    assert len(IMPORT_ROWS) >= 30 and len(MATH_ROWS) >= 40 and len(GONE_ROWS) >= 8
    assert len(DEFAULT_ROWS) >= 15 and len(RECIPE_ROWS) >= 12


@pytest.mark.parametrize("row", IMPORT_ROWS, ids=[first_code(r[0])[:60] for r in IMPORT_ROWS])
def test_every_keras2_import_fails_with_its_message_and_todays_import_works(row):
    """Both columns run here: the Keras 2 line says what the table says (or still works), today's line imports."""
    old, message, new = first_code(row[0]), row[1], row[2]
    if message.startswith("*works*"):
        exec(old, {})
    else:
        with pytest.raises(ImportError) as err:           # ModuleNotFoundError is an ImportError
            exec(old, {})
        assert error_index.produced(first_code(message), _said(err)), (first_code(message), str(err.value))
    if new.startswith("`from ") or new.startswith("`import "):
        exec(first_code(new), {})
    else:
        assert new.startswith("none"), new


# ---- K.* functions: each Keras 2 expression against its keras.ops replacement -------------------------------------

MATH_ROWS = table("`keras.backend` functions", 0)
GONE_ROWS = table("`keras.backend` functions", 1)
_RNG = np.random.default_rng(0)
INPUTS = {
    "x": _RNG.normal(size=(2, 3)).astype("float32"), "y": _RNG.normal(size=(2, 3)).astype("float32"),
    "w": _RNG.normal(size=(3,)).astype("float32"), "m": np.array([[True, False, True], [False, True, True]]),
    "i": np.array([0, 3]), "t": np.eye(3, dtype="float32")[[0, 2]],
    "p": np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]], "float32"),
    "b": np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]], "float32"),
    "q": np.array([[0.8, 0.3, 0.6], [0.2, 0.9, 0.4]], "float32"),
}
INPUTS["v"] = INPUTS["x"]


@pytest.mark.parametrize("row", MATH_ROWS, ids=[r[0].strip("`") for r in MATH_ROWS])
def test_every_K_function_is_gone_and_its_keras_ops_twin_computes_the_same(row):
    """The 2017 expression fails on today's keras.backend; on TensorFlow's legacy tf.keras.backend (Keras 2 code) it
    computes what the keras.ops column computes."""
    from keras import backend as K_today

    old, new = [c.strip("`").split("`, `")[0] for c in row]
    with pytest.raises(AttributeError) as err:
        eval(old, {"K": K_today, "keras": keras, **INPUTS})
    assert re.match(r"AttributeError: module 'keras.backend' has no attribute '\w+'", _said(err))
    keras2 = eval(old, {"K": tf.keras.backend, **{k: tf.constant(v) for k, v in INPUTS.items()}})  # tensors, as in 2017
    today = eval(new, {"ops": keras.ops, "keras": keras, **INPUTS})
    if isinstance(keras2, tuple):
        assert keras2 == today
    else:
        np.testing.assert_allclose(keras.ops.convert_to_numpy(today), keras.ops.convert_to_numpy(keras2),
                                   rtol=1e-5, atol=1e-6)


def test_the_K_names_without_an_ops_function_are_gone():
    from keras import backend as K_today

    names = {n for row in GONE_ROWS for n in re.findall(r"\bK\.(\w+)\(", row[0])} | {"tf"}
    assert len(names) >= 15
    assert not [n for n in names if hasattr(K_today, n)], "keras.backend has them again: update the table"
    assert K_today.floatx() == "float32" and K_today.epsilon() == 1e-7   # what stayed
    assert not hasattr(tf.keras.backend, "learning_phase") and not hasattr(tf.keras.backend, "function")


def test_the_two_K_functions_that_are_not_one_for_one():
    x = INPUTS["x"]
    assert not np.allclose(keras.ops.hard_sigmoid(x), tf.keras.backend.hard_sigmoid(x))      # slope 1/6, not 0.2
    assert tf.keras.backend.expand_dims(x).shape == (2, 3, 1)                                   # the last axis
    with pytest.raises(TypeError):
        keras.ops.expand_dims(x)                                                                # no default axis


# ---- defaults that changed: against Keras 2.1.3's own numbers, recorded in the time capsule ------------------------

DEFAULT_ROWS = table("Keras 2 defaults that changed")
RECIPE_ROWS = table("The `multi_gpu_model` recipe, line by line")


@pytest.fixture(scope="module")
def keras2():
    """What Keras 2.1.3 computed (helpers/capsule_scripts/keras2_defaults.py, its recorded transcript)."""
    from helpers import capsule

    run = capsule.load_transcript("keras2_defaults")
    assert run.versions["keras"] == "2.1.3"
    return json.loads(run.output.split("keras 2 numbers: ", 1)[1].splitlines()[0])


def _three_steps(optimizer) -> list:
    """The weight after each of three steps from 1.0 on a constant gradient of 1e-3 (the capsule's experiment)."""
    weight, seen = keras.Variable(np.ones((1, 1), "float32")), []
    for _ in range(3):
        optimizer.apply_gradients([(np.full((1, 1), 1e-3, "float32"), weight)])
        seen.append(float(weight.numpy()[0, 0]))
    return seen


@pytest.mark.parametrize("name, keras2_args", [
    ("Adadelta", dict(learning_rate=1.0)),
    ("Adagrad", dict(learning_rate=0.01, initial_accumulator_value=0.0, epsilon=1e-14)),
    ("Adamax", dict(learning_rate=0.002)),
    ("RMSprop", dict(epsilon=1e-14)),
    ("Adam", {}),
    ("SGD", {}),
])
def test_an_optimizer_with_todays_defaults_and_with_keras2s(keras2, name, keras2_args):
    expected = keras2[name]["weights"]
    today = _three_steps(getattr(keras.optimizers, name)())
    assert np.allclose(today, expected, atol=2e-6) == (not keras2_args)      # the defaults differ where a fix exists
    np.testing.assert_allclose(_three_steps(getattr(keras.optimizers, name)(**keras2_args)), expected, atol=2e-6)


def test_nadam_comes_close_only(keras2):
    expected = keras2["Nadam"]["weights"]
    with pytest.raises(ValueError) as err:
        keras.optimizers.Nadam(schedule_decay=0.004)
    assert "Argument(s) not recognized: {'schedule_decay': 0.004}" in _said(err)
    near = _three_steps(keras.optimizers.Nadam(learning_rate=0.002))
    assert not np.allclose(_three_steps(keras.optimizers.Nadam()), expected, atol=1e-4)
    assert np.allclose(near, expected, atol=1e-4) and not np.allclose(near, expected, atol=2e-6)


def keras2_hard_sigmoid(x):
    """Keras 2's hard sigmoid (keras/backend/tensorflow_backend.py, 2.1.3): 0.2 x + 0.5, clipped to [0, 1]."""
    return keras.ops.clip(0.2 * x + 0.5, 0.0, 1.0)


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_recurrent_layers_compute_keras2s_numbers_only_with_keras2s_gates(keras2, name):
    x = (np.arange(12, dtype="float32").reshape(2, 3, 2) - 5) / 4
    extra = {"reset_after": False} if name == "GRU" else {}

    def output(activation):
        layer = getattr(keras.layers, name)(3, recurrent_activation=activation, **extra)
        layer.build((None, 3, 2))
        layer.set_weights([((np.arange(np.prod(s), dtype="float32").reshape(s) % 7) - 3) / 5
                           for s in keras2[name]["shapes"]])
        return keras.ops.convert_to_numpy(layer(x))

    assert keras2["hard_sigmoid(1.0)"] == pytest.approx(0.7)
    assert float(keras.activations.hard_sigmoid(np.float32(1.0))) == pytest.approx(1 / 6 + 0.5)
    for today in ("sigmoid", "hard_sigmoid"):                                 # the default, and Keras 3's hard sigmoid
        assert np.abs(output(today) - keras2[name]["output"]).max() > 1e-2
    np.testing.assert_allclose(output(keras2_hard_sigmoid), keras2[name]["output"], atol=1e-6)
    defaults = getattr(keras.layers, name)(3)
    assert defaults.recurrent_activation is keras.activations.sigmoid
    assert name == "LSTM" or defaults.reset_after is True
    assert getattr(keras.layers, name)(3, implementation=1)                   # accepted


def test_the_other_defaults_of_the_table(keras2):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert keras.layers.LeakyReLU(alpha=0.3).negative_slope == 0.3
    assert any("Argument `alpha` is deprecated" in str(w.message) for w in caught)
    bn = keras.layers.BatchNormalization()
    assert (bn.momentum, bn.epsilon) == (0.99, 1e-3)
    assert inspect.signature(keras.callbacks.ModelCheckpoint).parameters["monitor"].default == "val_loss"
    assert keras.utils.pad_sequences([[1, 2]], maxlen=3).tolist() == [[0, 1, 2]]          # at the start, as in Keras 2
    assert keras2["multi_gpu_model dropout"]["tower 0 row 0 == tower 1 row 0"] is False   # a mask per tower, in 2018
    firsts = [first_code(r[0]).split("(")[0] for r in DEFAULT_ROWS]
    assert firsts == ["Adadelta", "Adagrad", "Adamax", "Nadam", "RMSprop", "Adam", "LSTM", "GRU", "LSTM", "Embedding",
                      "pad_sequences", "Tokenizer", "metrics=['acc']", "LeakyReLU", "BatchNormalization", "Dropout",
                      "ModelCheckpoint"], "a row was added or moved: give it its check in this file"


def test_acc_keeps_its_keys_and_accuracy_gets_its_own(model):
    x, y = _data()
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["acc"])
    assert sorted(m.fit(x, y, validation_data=(x, y), epochs=1, verbose=0).history) == [
        "acc", "loss", "val_acc", "val_loss"]


# ---- text and sequences -------------------------------------------------------------------------------------------

def test_tokenizer_against_textvectorization(keras2):
    texts = ["Don't stop, don't!", "stop it"]
    legacy = tf.keras.preprocessing.text.Tokenizer(num_words=10)        # Keras 2's class, still in tf.keras
    legacy.fit_on_texts(texts)
    assert legacy.word_index == keras2["Tokenizer"]["word_index"]
    assert legacy.texts_to_sequences(["don't stop unknown"]) == keras2["Tokenizer"]["sequences"]   # unknown: dropped
    vectorize = keras.layers.TextVectorization(max_tokens=4, output_sequence_length=5)
    vectorize.adapt(texts)
    assert vectorize.get_vocabulary() == ["", "[UNK]", "stop", "dont"]   # 2 words for max_tokens=4; no apostrophe
    assert vectorize(["don't stop unknown"]).numpy().tolist() == [[3, 2, 1, 0, 0]]   # [UNK] = 1, padded at the end
    again = tf.keras.preprocessing.text.Tokenizer()
    again.fit_on_texts(["bad film", "good film"])
    once = tf.keras.preprocessing.text.Tokenizer()
    once.fit_on_texts(["good film", "bad film"])
    assert once.word_index != again.word_index        # the same words, fitted in another order: other indices


def test_embedding_arguments_from_keras2():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        keras.layers.Embedding(20000, 8, input_length=200)
    [said] = [_said(w.message) for w in caught if "input_length" in str(w.message)]
    assert "Argument `input_length` is deprecated. Just remove it." in said
    with pytest.raises(ValueError) as err:
        keras.layers.Embedding(20000, 8, batch_input_shape=(32, 200))
    assert "Unrecognized keyword arguments passed to Embedding: {'batch_input_shape': (32, 200)}" in _said(err)


def test_keras2_gru_weights_do_not_fit_todays_gru(tmp_path):
    """A legacy .h5 written from a reset_after=False GRU: Keras 2's layout (measured once on a Keras 2.1.3 file)."""
    def model(**kwargs):
        inputs = keras.Input((3, 2))
        return keras.Model(inputs, keras.layers.GRU(3, name="gru", **kwargs)(inputs))

    old = model(reset_after=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old.save(tmp_path / "keras2_gru.h5")
    with pytest.raises(ValueError) as err:
        model().load_weights(tmp_path / "keras2_gru.h5")
    said = _said(err)
    assert "Shape mismatch in layer #0 (named gru)for weight" in said and "gru_cell/bias" in said
    assert "Weight expects shape (2, 9). Received saved weight with shape (9,)" in said
    model(reset_after=False).load_weights(tmp_path / "keras2_gru.h5")


# ---- custom layers, losses and metrics -----------------------------------------------------------------------------

def test_add_weight_with_the_name_first():
    class Keras2Style(keras.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight("W", (input_shape[-1], 2))

        def call(self, x):
            return x @ self.w

    with pytest.raises(ValueError) as err:
        Keras2Style()(np.ones((1, 3), "float32"))
    said = _said(err)
    if tuple(map(int, keras.__version__.split(".")[:2])) >= (3, 14):
        assert "`name` must be passed as a keyword argument. Received: add_weight('W', ...)" in said
    else:
        assert "Could not interpret initializer identifier: (3, 2)" in said


def test_masks_and_added_losses_in_a_keras2_layer():
    class Keras2Mask(keras.layers.Layer):
        def compute_mask(self, input, input_mask=None):   # noqa: A002 - Keras 2's names
            return None

        def call(self, x, mask=None):
            return keras.ops.sum(x * keras.ops.expand_dims(keras.ops.cast(mask, x.dtype), -1), axis=1)

    class NoMask(keras.layers.Layer):
        def call(self, x):
            return keras.ops.sum(x, axis=1)

    tokens = keras.Input((5,), dtype="int32")
    embedded = keras.layers.Embedding(10, 3, mask_zero=True)(tokens)
    assert keras.Model(tokens, Keras2Mask()(embedded)).output_shape == (None, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        NoMask(name="attention")(embedded)
    [said] = [_said(w.message) for w in caught if "mask" in str(w.message)]
    assert ("Layer 'attention' (of type NoMask) was passed an input with a mask attached to it. However, this layer "
            "does not support masking and will therefore destroy the mask information.") in said

    class AddedLoss(keras.layers.Layer):
        def call(self, x):
            self.add_loss(keras.ops.mean(x), inputs=x)
            return x

    with pytest.raises(TypeError) as err:
        AddedLoss()(np.ones((2, 2), "float32"))
    assert "Layer.add_loss() got an unexpected keyword argument 'inputs'" in _said(err)


@pytest.fixture(scope="module")
def two(replicas):
    """Two replicas, with an all-reduce that is not the process's one default collective (test_collective_policy)."""
    return tf.distribute.MirroredStrategy(replicas, cross_device_ops=tf.distribute.ReductionToOneDevice())


@pytest.fixture(scope="module")
def one(replicas):
    return tf.distribute.MirroredStrategy(replicas[:1])


def test_unseeded_random_numbers_in_a_layer_fail_under_a_strategy(two):
    class Noise(keras.layers.Layer):
        def __init__(self, seeded=False, **kwargs):
            super().__init__(**kwargs)
            self.seed_generator = keras.random.SeedGenerator(1) if seeded else None

        def call(self, x, training=None):
            return x + keras.random.normal(keras.ops.shape(x), seed=self.seed_generator) if training else x

    x, y = _data()
    for seeded in (False, True):
        with two.scope():
            m = keras.Sequential([keras.Input((4,)), Noise(seeded), keras.layers.Dense(2)])
            m.compile(optimizer="sgd", loss="mse")
        if seeded:
            m.fit(x, np.zeros((16, 2)), epochs=1, batch_size=8, verbose=0)
        else:
            with pytest.raises(ValueError) as err:
                m.fit(x, np.zeros((16, 2)), epochs=1, batch_size=8, verbose=0)
            assert "tf.function only supports singleton tf.Variables created on the first call." in _said(err)


def test_every_replica_draws_the_same_dropout_mask(two):
    """keras#20611/#20612: the seed state is mirrored, so both replicas drop the same units (lesson 03 shows it)."""
    with two.scope():
        dropout = keras.layers.Dropout(0.5)
    for _ in range(2):                                  # and again at the next step: new masks, still the same twice
        masks = two.run(tf.function(dropout), args=(tf.ones((4, 64)),), kwargs={"training": True})
        first, second = [m.numpy() for m in two.experimental_local_results(masks)]
        assert 0 < (first == 0).sum() < first.size and np.array_equal(first, second)


def test_saving_a_model_with_unregistered_and_registered_custom_objects(tmp_path):
    def build(layer_class, metric):
        inputs = keras.Input((3, 2))
        m = keras.Model(inputs, keras.layers.Dense(1)(layer_class()(inputs)))
        m.compile(optimizer="adam", loss="mse", metrics=[metric])
        return m

    class Attention(keras.layers.Layer):
        def call(self, x):
            return keras.ops.sum(x, axis=1)

    def f1(y_true, y_pred):
        return keras.ops.mean(y_pred)

    build(Attention, f1).save(tmp_path / "plain.keras")
    with pytest.raises(TypeError) as err:
        keras.models.load_model(tmp_path / "plain.keras")
    assert ("Could not locate class 'Attention'. Make sure custom classes and functions are decorated with "
            "`@keras.saving.register_keras_serializable()`.") in _said(err)
    with pytest.raises(TypeError) as err:
        keras.models.load_model(tmp_path / "plain.keras", custom_objects={"Attention": Attention})
    assert "TypeError: Could not locate function 'f1'. Make sure custom classes" in _said(err)
    assert keras.models.load_model(tmp_path / "plain.keras", custom_objects={"Attention": Attention, "f1": f1})

    registered = keras.saving.register_keras_serializable(package="test_keras2_script")
    build(registered(Attention), registered(f1)).save(tmp_path / "registered.keras")
    assert keras.models.load_model(tmp_path / "registered.keras").count_params() == 3   # no custom_objects


LOSSES = {
    "K_mean": lambda y_true, y_pred: keras.ops.mean(keras.ops.square(y_pred - y_true)),                # one number
    "K_mean_rows": lambda y_true, y_pred: keras.ops.mean(keras.ops.square(y_pred - y_true), axis=-1),  # one per row
    "K_sum": lambda y_true, y_pred: keras.ops.sum(keras.ops.square(y_pred - y_true)),                  # a sum
}


def _one_sgd_step(strategy):
    """One SGD step on one batch of 64 rows, a Dense(1) head per loss of LOSSES (no weight shared between heads):
    each head's weight change, and each loss as logged."""
    x = np.random.default_rng(0).random((64, 4), dtype="float32")
    y = (x.sum(1, keepdims=True) > 2).astype("float32")
    with strategy.scope():
        inputs = keras.Input((4,))
        m = keras.Model(inputs, {name: keras.layers.Dense(1, kernel_initializer="ones", name=name)(inputs)
                                 for name in LOSSES})
        m.compile(optimizer=keras.optimizers.SGD(0.01), loss=LOSSES)
    before = {name: m.get_layer(name).kernel.numpy().copy() for name in LOSSES}
    logs = m.fit(x, {name: y for name in LOSSES}, batch_size=64, epochs=1, shuffle=False, verbose=0).history
    return {name: (m.get_layer(name).kernel.numpy() - before[name], logs[f"{name}_loss"][0]) for name in LOSSES}


def test_a_custom_loss_that_returns_one_number_counts_n_times_on_n_replicas(one, two):
    """Keras divides each replica's loss by N only when the loss gives one value per row (losses/loss.py,
    reduce_values): a loss that is one number already counts N times on N replicas, its gradient too."""
    on_one, on_two = _one_sgd_step(one), _one_sgd_step(two)
    for name, ratio in (("K_mean", 2.0), ("K_mean_rows", 1.0), ("K_sum", 1.0)):
        print(f"{name}: 2 replicas / 1 replica: step x{float(on_two[name][0][0, 0] / on_one[name][0][0, 0]):.3f}, "
              f"logged loss x{on_two[name][1] / on_one[name][1]:.3f}")
        np.testing.assert_allclose(on_two[name][0], ratio * on_one[name][0], rtol=1e-4)
        assert on_two[name][1] == pytest.approx(ratio * on_one[name][1], rel=1e-4)


def test_a_metric_computed_per_batch_depends_on_the_batch_and_the_replicas(one, two):
    """The pasted f1 gives three values for one model and one data set: the whole set at once, batches of 64 (a
    partial last batch), the same batches on 2 replicas. F1Score and the loss give one value: a strategy logs what one
    device evaluates, partial batch included (not a cause of a lower reloaded score)."""
    def f1(y_true, y_pred):                               # the 2017 function, with keras.ops for K
        y_pred = keras.ops.round(keras.ops.clip(y_pred, 0, 1))
        tp = keras.ops.sum(y_true * y_pred)
        precision = tp / (keras.ops.sum(y_pred) + 1e-7)
        recall = tp / (keras.ops.sum(y_true) + 1e-7)
        return 2 * precision * recall / (precision + recall + 1e-7)

    rng = np.random.default_rng(0)
    x, y = rng.random((96, 4), dtype="float32"), (rng.random((96, 1)) < 0.3).astype("float32")

    def scores(strategy, batch_size):
        with strategy.scope():
            keras.utils.set_random_seed(1)
            m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
            m.compile(optimizer="adam", loss="binary_crossentropy",
                      metrics=[f1, keras.metrics.F1Score(average="micro", threshold=0.5, name="F1Score")])
        return m.evaluate(x, y, batch_size=batch_size, verbose=0, return_dict=True)

    runs = [scores(one, 96), scores(one, 64), scores(two, 64)]
    print("f1 per batch:", [r["f1"] for r in runs], "F1Score:", [r["F1Score"] for r in runs])
    assert len({round(r["f1"], 6) for r in runs}) == 3
    for key in ("F1Score", "loss"):
        np.testing.assert_allclose([r[key] for r in runs], runs[0][key], rtol=1e-5)
    assert runs[0]["F1Score"] == pytest.approx(runs[0]["f1"], rel=1e-5)      # the whole set: the same number


def test_a_checkpoint_on_a_missing_key_keeps_the_last_epoch_not_the_best(tmp_path):
    """Cause 1 of a reloaded model that scores below its logged best: monitor='val_acc' with mode='max' and
    metrics=['accuracy'] saves every epoch. The last epoch is made worse on purpose (its weights negated, its learning
    rate 0); a second checkpoint, on val_accuracy, keeps the best."""
    x = np.random.default_rng(0).random((64, 4), dtype="float32")
    y = (x[:, 0] > 0.5).astype("int32")
    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
    m.compile(optimizer=keras.optimizers.SGD(0.5), loss="sparse_categorical_crossentropy", metrics=["accuracy"])

    def spoil(epoch, logs):
        if epoch == 3:
            m.set_weights([-w for w in m.get_weights()])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logged = m.fit(x, y, validation_data=(x, y), epochs=4, verbose=0, callbacks=[
            keras.callbacks.LambdaCallback(on_epoch_begin=spoil),
            keras.callbacks.LearningRateScheduler(lambda epoch, lr: 0.0 if epoch == 3 else lr),
            keras.callbacks.ModelCheckpoint(str(tmp_path / "val_acc.keras"), monitor="val_acc", mode="max",
                                            save_best_only=True),
            keras.callbacks.ModelCheckpoint(str(tmp_path / "val_accuracy.keras"), monitor="val_accuracy",
                                            save_best_only=True)]).history["val_accuracy"]
    reloaded = {name: keras.models.load_model(tmp_path / f"{name}.keras").evaluate(x, y, verbose=0)[1]
                for name in ("val_acc", "val_accuracy")}
    print("logged val_accuracy:", logged, "reloaded:", reloaded)
    assert logged[-1] < max(logged)
    assert reloaded["val_acc"] == pytest.approx(logged[-1])          # the last epoch's model
    assert reloaded["val_accuracy"] == pytest.approx(max(logged))    # the best epoch's model


# ---- the optimizer's rate, checkpoint names, weights files, the recipe ---------------------------------------------

def test_optimizer_lr_and_checkpoint_names_and_weights_files(model, tmp_path):
    with pytest.raises(AttributeError) as err:
        model.optimizer.lr  # noqa: B018
    assert _said(err) == "AttributeError: 'Adam' object has no attribute 'lr'"
    model.optimizer.learning_rate.assign(1e-4)
    assert float(model.optimizer.learning_rate) == pytest.approx(1e-4)
    x, y = _data()
    with pytest.raises(KeyError) as err:
        model.fit(x, y, validation_data=(x, y), epochs=1, verbose=0, callbacks=[
            keras.callbacks.ModelCheckpoint(str(tmp_path / "weights.{epoch:02d}-{val_acc:.3f}.keras"))])
    assert "Failed to format this callback filepath: " in _said(err) and "Reason: \\'val_acc\\'" in str(err.value)
    with pytest.raises(ValueError) as err:
        keras.callbacks.ModelCheckpoint(str(tmp_path / "best.hdf5"))
    assert "The filepath provided must end in `.keras` (Keras model format)." in _said(err)
    with pytest.raises(ValueError) as err:
        model.save_weights(tmp_path / "weights.h5")
    assert "The filename must end in `.weights.h5`. Received: filepath=" in _said(err)
    model.save_weights(tmp_path / "model.weights.h5")


def test_model_save_writes_hdf5_that_modelcheckpoint_refuses(model, tmp_path, caplog):
    with caplog.at_level(logging.WARNING), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.save(tmp_path / "model.hdf5")
    assert any("This file format is considered legacy." in r.getMessage() for r in caplog.records)
    assert keras.models.load_model(tmp_path / "model.hdf5").count_params() == model.count_params()


def test_the_recipe_lines_that_run_on_cpu_devices(replicas, one):
    """tf.device('/cpu:0') inside the scope changes nothing; one replica runs the same script; soft placement is on."""
    other = tf.distribute.MirroredStrategy(replicas[1:])            # one replica, on the second device
    with other.scope():
        with tf.device("/cpu:0"):                                   # the 2017 template line, left in
            m = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    [component] = m.weights[0].value.values
    assert tf.DeviceSpec.from_string(component.device) == tf.DeviceSpec.from_string(replicas[1]).replace(
        job="localhost", replica=0, task=0)                        # the strategy's device, not the CPU:0 scope
    assert tf.config.get_soft_device_placement()
    x, y = _data()
    with one.scope():
        m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
        m.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    assert m.distribute_strategy.num_replicas_in_sync == 1 and m.fit(x, y, epochs=1, verbose=0)
