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
learning_rate = 1e-3 * strategy.num_replicas_in_sync ** 0.5  # sqrt(N) for Adam is a rule of thumb (SGD: x N)
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
    model.optimizer.build(model.trainable_variables)  # its variables exist now: a resumed run can load them
# 5. Files: only in train_2gpus.run/, a folder the job marks as its own; each written to a temporary name, then renamed.
RUN, MARK = "train_2gpus.run", "train_2gpus.run/.made-by-train_2gpus"
if os.path.isdir(RUN) and os.listdir(RUN) and not os.path.isdir(MARK):   # an empty folder is taken over
    raise SystemExit(f"{os.path.abspath(RUN)} was not made by this script: move or rename it, then run again")
os.makedirs(MARK, exist_ok=True)                          # the folder and its mark
def save(write, name):  # os.replace is atomic: a kill at any moment leaves the old file or the new one, whole
    write(f"{RUN}/tmp-{name}")
    os.replace(f"{RUN}/tmp-{name}", f"{RUN}/{name}")
def end_of_epoch(epoch, logs):  # the best model, then the state to resume from; Keras prints the epoch's line after
    if logs["val_accuracy"] > max(scores):
        save(model.save, "best.keras")
    scores.append(logs["val_accuracy"])
    save(model.save_weights, "state.weights.h5")   # weights and optimizer: its step count gives the epoch
# 6. fit, after the epochs done: a resumed run reads its best score back from best.keras, and loads its state.
scores = [keras.models.load_model(f"{RUN}/best.keras").evaluate(val, verbose=0)[1]
          if os.path.exists(f"{RUN}/best.keras") else 0.0]
if os.path.exists(f"{RUN}/state.weights.h5"):
    model.load_weights(f"{RUN}/state.weights.h5")
done = int(model.optimizer.iterations.numpy()) // len(train)
print(f"start after epoch {done} of 6; best so far: val_accuracy {max(scores):.4f}")
model.fit(train, validation_data=val, epochs=6, initial_epoch=done, shuffle=False, verbose=2,
          callbacks=[keras.callbacks.LambdaCallback(on_epoch_end=end_of_epoch)])
accuracy = keras.models.load_model(f"{RUN}/best.keras").evaluate(val, verbose=0)[1]
print(f"best.keras reloads: val_accuracy {accuracy:.4f}")
assert accuracy > 0.5 and abs(accuracy - max(scores)) < 0.01  # the best epoch, across restarts too
