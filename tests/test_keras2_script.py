"""The rest of a Keras 2 script: every Keras 2 idiom lesson 03's 2018 script uses, as it fails (or is ignored) today.

Each test triggers one idiom on today's stack and prints what TensorFlow or Keras says, so the error-index check
(tools/pytest_course.py) finds every message of TROUBLESHOOTING's "The rest of a Keras 2 script" section in the
run. Where Keras 3.13 and 3.15 word a message differently, the index holds the stable part.
"""

import logging
import warnings

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
