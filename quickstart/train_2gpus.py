"""Train a Keras model with MirroredStrategy: on every GPU (2+), on 1 GPU split in two, or on the CPU split in two."""
import os

import keras
import tensorflow as tf
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

# 1. Devices, before TensorFlow starts: no GPU -> split the CPU in two; one GPU -> split it in two.
gpus = tf.config.list_physical_devices("GPU")
if not gpus:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
elif len(gpus) == 1:  # a rehearsal, not a speed-up: both halves share one GPU
    half = tf.config.LogicalDeviceConfiguration(memory_limit=2048)  # 2 GiB each: 4 GiB of a 15 GiB T4
    tf.config.set_logical_device_configuration(gpus[0], [half, half])

# 2. One replica per device (every GPU you have, or the two halves); each batch is split between them.
strategy = tf.distribute.MirroredStrategy()
print(f"replicas: {strategy.num_replicas_in_sync} on {strategy.extended.worker_devices}")
assert strategy.num_replicas_in_sync == max(len(gpus), 2)

# 3. The global batch and the learning rate grow with the replicas. Data: 8x8 handwritten digits, offline.
global_batch = 32 * strategy.num_replicas_in_sync
learning_rate = 1e-3 * strategy.num_replicas_in_sync ** 0.5  # N times the batch: Adam x sqrt(N) (SGD: x N)
keras.utils.set_random_seed(0)
x, y = load_digits(return_X_y=True)
x_train, x_val, y_train, y_val = train_test_split((x / 16).astype("float32"), y, test_size=0.2, random_state=0)
train = (tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(len(x_train), seed=0)
         .batch(global_batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE))   # full batches only
val = tf.data.Dataset.from_tensor_slices((x_val, y_val)).batch(global_batch)     # every row

# 4. Model and compile inside the scope: the variables are mirrored on every replica.
with strategy.scope():
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(10, activation="softmax")])
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])

# 5. fit (the dataset shuffles itself). Keep the best model; resume from backup/ if the job is killed.
# BackupAndRestore does not keep ModelCheckpoint's best score, so a resumed run reads it back from best.keras.
resuming = os.path.isdir("backup") and os.path.exists("best.keras")
best_so_far = keras.models.load_model("best.keras").evaluate(val, verbose=0)[1] if resuming else None
callbacks = [keras.callbacks.ModelCheckpoint("best.keras", monitor="val_accuracy", save_best_only=True,
                                             initial_value_threshold=best_so_far),
             keras.callbacks.BackupAndRestore("backup")]
history = model.fit(train, validation_data=val, epochs=6, shuffle=False, callbacks=callbacks, verbose=2)

accuracy = keras.models.load_model("best.keras").evaluate(val, verbose=0)[1]
print(f"best.keras reloads: val_accuracy {accuracy:.3f}")
assert accuracy > 0.5 and accuracy >= max(history.history["val_accuracy"]) - 0.01  # the best epoch, restarts too
