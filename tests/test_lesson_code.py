"""Show the code you teach: each lesson's code cells contain the API calls the lesson is about.

A learner must be able to copy these calls from the lesson into a project, so they may not hide
inside helpers. The list per lesson is the contract; a lesson that moves a call into a helper fails here.
"""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: lesson number -> the calls (substrings) its code cells must contain.
REQUIRED = {
    "01": ["tf.distribute.MirroredStrategy(", "experimental_distribute_dataset(", "strategy.run(",
           "tf.nn.compute_average_loss(", "apply_gradients(", "with tf.device(", "tf.GradientTape()"],
    "02": ["tf.config.set_logical_device_configuration(", "tf.config.set_visible_devices(",
           "tf.config.set_soft_device_placement(False)", "tf.config.experimental.set_memory_growth(",
           "tf.config.list_logical_devices(", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
           "tf.debugging.set_log_device_placement(True)", "MirroredStrategy(devices="],
    "03": ["tf.distribute.MirroredStrategy(", "with strategy.scope():", ".compile(", ".fit(",
           "* strategy.num_replicas_in_sync", ".batch(", ".prefetch(tf.data.AUTOTUNE)", "warmup_target=",
           ".distribute_strategy.num_replicas_in_sync"],
    "04": ["BatchNormalization(", "synchronized=", "tf.distribute.MirroredStrategy(", "with strategy.scope():",
           "kd.DataParallel("],
    "05": ["keras.callbacks.ModelCheckpoint(", "keras.models.load_model(", "with strategy.scope():",
           "save_best_only=True", "initial_epoch=", "keras.callbacks.BackupAndRestore(", "%%writefile"],
    "06": ["with strategy.scope():", ".fit(", ".cache()", ".prefetch(tf.data.AUTOTUNE)",
           "keras.mixed_precision.set_global_policy(", "time.perf_counter()", "* strategy.num_replicas_in_sync"],
    "07": ["%%writefile", "tf.distribute.MultiWorkerMirroredStrategy(", "TF_CONFIG", "strategy.run(",
           "tf.GradientTape()", "tf.nn.compute_average_loss(", "tf.train.CheckpointManager("],
    "08": ["set_distribution(None)", "DataParallel(", "ModelParallel(", "DeviceMesh(",
           "LayoutMap(", "layout_map[", ".sharding", "addressable_shards"],
    "11": ["keras_hub.models.GemmaBackbone(", "keras_hub.models.GemmaCausalLM(", "enable_lora(", "get_layout_map(",
           "kd.ModelParallel(", "kd.DeviceMesh(", "save_lora_weights(", "load_lora_weights(", ".fit(",
           "set_distribution(None)"],
}


def _code(number: str) -> str:
    [path] = sorted((ROOT / "notebooks").glob(f"{number}_*.ipynb"))
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


@pytest.mark.parametrize("number", sorted(REQUIRED))
def test_lesson_writes_the_calls_it_teaches(number):
    code = _code(number)
    missing = [call for call in REQUIRED[number] if call not in code]
    assert not missing, f"lesson {number} does not write these calls in its cells: {missing}"


def test_every_lesson_has_a_contract():
    numbers = {p.name[:2] for p in (ROOT / "notebooks").glob("*.ipynb")} - {"00"}
    assert numbers - set(REQUIRED) <= {"09", "10"}, "add the new lesson's calls to REQUIRED"
