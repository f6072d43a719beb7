"""Lesson 01's checkers explain wrong answers: each case asserts the sentence the learner reads.

tests/test_exercises.py runs every solution, the unattempted answer, answers of the wrong kind and the hints.
"""


import keras
import tensorflow as tf
from test_exercises import not_yet as _not_yet  # the shared checks
from test_exercises import notebook_snippet as _snippet

from helpers import exercises


def test_a_per_replica_value_is_named(replicas):
    strategy = exercises.practice_strategy(replicas)   # a test process keeps one collective strategy too
    per_replica = strategy.run(lambda: tf.constant([1.0]))
    ok, text = exercises.verdict("01.1", per_replica)
    assert not ok and "you passed a PerReplica value" in text and "experimental_local_results" in text, text


# ---- 01.1: the replica step ------------------------------------------------------------------------

def _step(loss_of, distribute=True, apply=True, returns="sum"):
    """A train_step answer: ``loss_of(per_example, x)`` is each replica's loss; the other flags put faults in."""
    def train_step(strategy, model, optimizer, x, y):
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(len(x))
        args = next(iter(strategy.experimental_distribute_dataset(dataset))) if distribute else (x, y)

        def replica_step(xs, ys):
            with tf.GradientTape() as tape:
                loss = loss_of(tf.square(model(xs, training=True) - ys)[:, 0], len(x))
            grads = tape.gradient(loss, model.trainable_variables)
            if apply:
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        losses = strategy.run(replica_step, args=args)
        return losses if returns == "per_replica" else float(strategy.reduce(returns.upper(), losses, axis=None))

    return train_step


def _global(per_example, global_batch):
    return tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)


def test_01_1_the_mean_over_each_replicas_own_rows_is_twice_the_step(replicas):
    _not_yet("01.1", _step(lambda per_example, _: tf.reduce_mean(per_example)), "the update is 2x one device's step",
             "divided by the GLOBAL batch")


def test_01_1_the_whole_batch_on_every_replica_is_twice_the_step(replicas):
    _not_yet("01.1", _step(_global, distribute=False), "the update is 2x", "only its slice of the batch")


def test_01_1_no_update_and_a_wrong_loss(replicas):
    _not_yet("01.1", _step(_global, apply=False), "the weights did not change", "inside the function")
    _not_yet("01.1", _step(_global, returns="mean"), "the update is right, but the loss", "add up the replicas")
    _not_yet("01.1", _step(_global, returns="per_replica"), "a PerReplica value", "the whole batch's loss as one number")
    ok, text = exercises.verdict("01.1", _step(_global))
    assert ok, text                                   # the same answer without a fault is accepted


# ---- 01.2: the broken snippet ------------------------------------------------------------------------

def test_01_2_broken_snippet_keeps_adam_on_one_device(replicas):
    _not_yet("01.2", _snippet("01.2")["compile_split"], "all of Adam's slots ended up on",
             "fit creates them lazily")

    def forgot_return(model):
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")

    _not_yet("01.2", forgot_return, "it returned None (no `return model`?)")


# ---- 01.3: which parallelism ---------------------------------------------------------------------------

def _mesh(shape_of):
    def choose_mesh(weights_gb, activations_gb, device_gb, devices):
        return keras.distribution.DeviceMesh(shape=shape_of(len(devices)), axis_names=("batch", "model"),
                                             devices=devices)
    return choose_mesh


def test_01_3_always_data_parallel_does_not_fit_a_big_model():
    _not_yet("01.3", _mesh(lambda n: (n, 1)), "for 40 GB of weights", "the mesh (8, 1) puts 41 GB on each device")


def test_01_3_always_model_parallel_splits_more_than_it_must():
    _not_yet("01.3", _mesh(lambda n: (1, n)), "the mesh (1, 8) fits, but (8, 1) fits too")


def test_01_3_a_mesh_where_nothing_fits_and_an_error_where_something_does():
    best = exercises.get("01.3").solution()

    def never_raises(weights_gb, activations_gb, device_gb, devices):
        try:
            return best(weights_gb, activations_gb, device_gb, devices)
        except ValueError:
            return _mesh(lambda n: (1, n))(weights_gb, activations_gb, device_gb, devices)

    _not_yet("01.3", never_raises, "no mesh fits (the best one still needs 33 GB a device), so raise ValueError")

    def gives_up(weights_gb, activations_gb, device_gb, devices):
        if weights_gb > device_gb:
            raise ValueError("too big for one device")
        return best(weights_gb, activations_gb, device_gb, devices)

    _not_yet("01.3", gives_up, "raised ValueError: too big for one device, but the mesh (2, 4) fits")


def test_01_3_a_value_or_another_object_is_not_a_mesh():
    _not_yet("01.3", lambda w, a, g, devices: {"batch": len(devices), "model": 1},
             "it returned a dict with keys ['batch', 'model']; return keras.distribution.DeviceMesh(")
    _not_yet("01.3", lambda w, a, g, devices: keras.distribution.DeviceMesh((len(devices), 1), ("data", "model"),
                                                                             devices), "name the mesh's axes")
    mesh = exercises.get("01.3").solution()(2, 8, 16, [f"gpu:{i}" for i in range(8)])
    _not_yet("01.3", mesh, "you passed", "but this exercise wants a function choose_mesh", hint=False)


def test_01_3_situations_learned_by_heart_fail_on_a_new_one(monkeypatch):
    """Each check adds a situation drawn afresh; here one no table of the fixed six holds."""
    from helpers.exercises import lesson01

    monkeypatch.setattr(lesson01, "_random_situation", lambda: ((12, 4, 16, 4), (4, 1)))
    known = dict(lesson01.SITUATIONS)

    def choose_mesh(weights_gb, activations_gb, device_gb, devices):
        shape = known.get((weights_gb, activations_gb, device_gb, len(devices)))
        if shape is None:
            raise ValueError("no mesh fits")
        return keras.distribution.DeviceMesh(shape=shape, axis_names=("batch", "model"), devices=devices)

    ok, text = exercises.verdict("01.3", choose_mesh)
    assert not ok and "for 12 GB of weights, 4 GB of activations on 4 devices of 16 GB it raised ValueError" in text, text
