"""Train a Keras model on 2 replicas with MirroredStrategy: 2+ GPUs, 1 GPU split in two, or the CPU split in two."""
import keras
import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

# 1. Devices, before TensorFlow starts: no GPU -> split the CPU in two; one GPU -> split it in two.
gpus = tf.config.list_physical_devices("GPU")
if not gpus:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
elif len(gpus) == 1:
    half = tf.config.LogicalDeviceConfiguration(memory_limit=2048)  # MiB for each half
    tf.config.set_logical_device_configuration(gpus[0], [half, half])

# 2. One replica per device (every GPU you have, or the two halves); each batch is split between them.
strategy = tf.distribute.MirroredStrategy()
replicas = strategy.num_replicas_in_sync
print("replicas:", replicas)
assert replicas == max(len(gpus), 2), replicas

# 3. Data: 8x8 handwritten digits, offline. The global batch is per-replica batch x replicas.
keras.utils.set_random_seed(0)
x, y = load_digits(return_X_y=True)
x = (x / 16.0).astype("float32")
order = np.random.default_rng(0).permutation(len(x))
x, y = x[order], y[order]
global_batch = 32 * strategy.num_replicas_in_sync

def batches(x, y, shuffle=False):
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if shuffle:
        ds = ds.shuffle(len(x), seed=0)
    return ds.batch(global_batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

train, val = batches(x[:1440], y[:1440], shuffle=True), batches(x[1440:], y[1440:])

# 4. Model and compile inside the scope: the variables are mirrored on every replica.
with strategy.scope():
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(10, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])

# 5. fit as usual (the dataset shuffles itself). Keep the best model; resume here if the job is killed.
callbacks = [keras.callbacks.ModelCheckpoint("best.keras", monitor="val_accuracy", save_best_only=True),
             keras.callbacks.BackupAndRestore(backup_dir="backup")]
history = model.fit(train, validation_data=val, epochs=6, shuffle=False, callbacks=callbacks, verbose=2)

best = keras.models.load_model("best.keras")
accuracy = best.evaluate(val, verbose=0)[1]
print(f"best.keras reloads: val_accuracy {accuracy:.3f}")
assert history.history["loss"][-1] < history.history["loss"][0]        # it learned
assert abs(accuracy - max(history.history["val_accuracy"])) < 0.01     # best.keras is the best epoch
