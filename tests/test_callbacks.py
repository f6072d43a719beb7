"""Tests for helpers.callbacks: ParallelModelCheckpoint behaves like ModelCheckpoint, but saves the template."""

import os
import warnings

import keras
import numpy as np
import pytest

from helpers.callbacks import ParallelModelCheckpoint, count_saves

X = np.random.default_rng(0).random((48, 8)).astype("float32")
Y = (X.sum(axis=1) > 4).astype("int32")

#: name -> (filepath pattern, ModelCheckpoint keywords). Each pair is compared file by file.
CASES = {
    "defaults_epoch_names": ("m{epoch:02d}.keras", {}),
    "best_val_accuracy_auto": ("best_acc.keras", dict(monitor="val_accuracy", save_best_only=True)),
    "best_val_loss_explicit_max": ("best_max.keras", dict(monitor="val_loss", mode="max", save_best_only=True)),
    "weights_only": ("w{epoch}.weights.h5", dict(save_weights_only=True)),
    "every_2_batches": ("b{epoch}_{batch}.keras", dict(save_freq=2)),
    "threshold_never_met": ("never.keras", dict(monitor="val_loss", save_best_only=True,
                                                initial_value_threshold=-1.0)),
    "metric_in_name": ("l{epoch}_{val_loss:.3f}.keras", dict(monitor="val_loss")),
    "h5_suffix": ("legacy{epoch}.h5", {}),
}


def _template(name="template"):
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, activation="relu"),
                             keras.layers.Dense(2, activation="softmax")], name=name)


def _wrapper(template):
    """A trained model that contains the template (stands in for the parallel model)."""
    inp = keras.Input((8,))
    model = keras.Model(inp, template(inp), name="wrapper")
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


@pytest.fixture(scope="module")
def trained(tmp_path_factory, replicas):
    """One fit with a plain ModelCheckpoint and a ParallelModelCheckpoint per case (same logs for both)."""
    root = tmp_path_factory.mktemp("ckpt")
    template = _template()
    model = _wrapper(template)
    plain, parallel = {}, {}
    for name, (pattern, kwargs) in CASES.items():
        for kind, store in (("plain", plain), ("parallel", parallel)):
            folder = root / kind / name
            folder.mkdir(parents=True)
            path = str(folder / pattern)
            store[name] = (keras.callbacks.ModelCheckpoint(path, **kwargs) if kind == "plain"
                           else ParallelModelCheckpoint(template, path, **kwargs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy .h5 warning
        model.fit(X, Y, batch_size=12, epochs=3, validation_split=0.25, shuffle=False, verbose=0,
                  callbacks=list(plain.values()) + list(parallel.values()))
    return root, template, plain, parallel


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_files_and_decisions_as_model_checkpoint(trained, case):
    root, _, plain, parallel = trained
    names = {kind: sorted(os.listdir(root / kind / case)) for kind in ("plain", "parallel")}
    assert names["plain"] == names["parallel"]
    assert plain[case].best == parallel[case].best
    if case == "threshold_never_met":
        assert names["plain"] == []
    elif case == "every_2_batches":
        assert len(names["plain"]) == 4  # 36 rows / 12 = 3 batches per epoch, 9 batches, a save every 2nd
    else:
        assert names["plain"]


def test_saves_the_template_not_the_trained_model(trained):
    root, template, _, _ = trained
    plain = keras.models.load_model(root / "plain" / "defaults_epoch_names" / "m03.keras", compile=False)
    saved = keras.models.load_model(root / "parallel" / "defaults_epoch_names" / "m03.keras")
    assert plain.name == "wrapper" and saved.name == "template"
    for a, b in zip(saved.get_weights(), template.get_weights()):
        np.testing.assert_allclose(a, b)
    assert not saved.compiled  # the documented weakness: no optimizer state in the file


def test_same_errors_as_model_checkpoint(tmp_path):
    template = _template()
    for kwargs, exc, match in [(dict(period=1), TypeError, "period"),
                               (dict(save_freq="batch"), ValueError, "save_freq"),
                               (dict(save_weights_only=True), ValueError, r"\.weights\.h5")]:
        with pytest.raises(exc, match=match):
            keras.callbacks.ModelCheckpoint(str(tmp_path / "x.keras"), **kwargs)
        with pytest.raises(exc, match=match):
            ParallelModelCheckpoint(template, str(tmp_path / "x.keras"), **kwargs)
    with pytest.raises(ValueError, match=r"must end in `\.keras`"):
        ParallelModelCheckpoint(template, str(tmp_path / "x.hdf5"))
    with pytest.raises(TypeError):
        ParallelModelCheckpoint(template, str(tmp_path / "x.keras"), "val_loss")  # keyword-only


def test_val_acc_auto_mode_fails_like_model_checkpoint(tmp_path):
    template = _template()
    for make in (lambda p: keras.callbacks.ModelCheckpoint(p, monitor="val_acc", save_best_only=True),
                 lambda p: ParallelModelCheckpoint(template, p, monitor="val_acc", save_best_only=True)):
        model = _wrapper(template)
        with pytest.raises(ValueError, match="isn't able to automatically determine"):
            model.fit(X, Y, epochs=1, validation_split=0.25, verbose=0, callbacks=[make(str(tmp_path / "a.keras"))])


def test_bad_template(tmp_path):
    with pytest.raises(ValueError, match="template keras.Model"):
        ParallelModelCheckpoint("model.keras", str(tmp_path / "x.keras"))


def test_count_saves_counts_and_restores(tmp_path):
    model = _template()
    with count_saves(model) as counts:
        model.save(tmp_path / "a.keras")
        model.save_weights(tmp_path / "a.weights.h5")
        model.save_weights(tmp_path / "b.weights.h5")
    assert counts == {"save": 1, "save_weights": 2}
    assert "save" not in vars(model) and "save_weights" not in vars(model)
    with pytest.raises(ValueError, match="keras.Model"):
        with count_saves(object()):
            pass
