"""Exercises of 10_memory_and_profiling.

10.1 is checked by measurement: XLA's ``memory_analysis()`` of the train step the answer describes, compiled
on the lesson's N devices (Keras on JAX: the notebook's kernel; any other process measures in a fresh JAX
process with N host devices, 4 unless told). Results are cached per answer.
"""

from __future__ import annotations

import re

import keras
import numpy as np
from keras import distribution as kd

from ..checks import is_int
from ..memory_report import bytes_on_device, compiled_memory
from . import devices_here, jax_devices_here, register, run_in_jax

# ---- 10.1: fit a model into a per-device memory budget ------------------------------------------

INPUT_WIDTH = 256          #: the lesson's WIDTH: big_mlp() takes 256 features
HIDDEN = 1024              #: three hidden Dense layers this wide
GLOBAL_BATCH = 256         #: examples per weight update
#: Per-device budget (MiB, argument + temp of the compiled step) by device count N, from XLA:CPU's figures: the
#: kernels sharded over all N devices fit (N=2: 31.8 MiB; 4: 25.0, 27.5 with accumulation; 8: 21.6), the best
#: answer with fewer devices or no sharding does not (2: 39.4, 4: 31.8, 8: 25.0).
#: tests/test_exercises_lesson10.py re-measures N=2 and N=4.
BUDGETS_MIB = {2: 35, 4: 28, 8: 23}
KEYS_10_1 = ("replicas", "shard_weights", "gradient_accumulation_steps")


def big_mlp(name: str = "big_mlp"):
    """The model of exercise 10.1: 256 -> 1024 -> 1024 -> 1024 -> 10, float32 (about 2.4 M parameters)."""
    return keras.Sequential([keras.Input((INPUT_WIDTH,))]
                            + [keras.layers.Dense(HIDDEN, activation="relu", name=f"d{i}") for i in (1, 2, 3)]
                            + [keras.layers.Dense(10, name="out")], name=name)


def _measure_here(replicas: int, shard_weights: bool, accumulation: int) -> dict:
    """Compile the step in this process (Keras on JAX, >= ``replicas`` devices); bytes per device."""
    import jax

    devices = kd.list_devices()[:replicas]
    if shard_weights and replicas > 1:
        layout_map = kd.LayoutMap(kd.DeviceMesh((replicas,), ("batch",), devices))
        layout_map[".*kernel"] = ("batch", None)
        dist = kd.ModelParallel(layout_map=layout_map, batch_dim_name="batch")
    else:
        dist = kd.DataParallel(devices=devices)
    with dist.scope():
        model = big_mlp()
        optimizer = keras.optimizers.Adam(1e-3, gradient_accumulation_steps=accumulation if accumulation > 1 else None)
        optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def loss(trainable, non_trainable, x, y):
        logits, non_trainable = model.stateless_call(trainable, non_trainable, x, training=True)
        return loss_fn(y, logits), non_trainable

    def train_step(trainable, non_trainable, opt_vars, x, y):
        (value, non_trainable), grads = jax.value_and_grad(loss, has_aux=True)(trainable, non_trainable, x, y)
        trainable, opt_vars = optimizer.stateless_apply(opt_vars, grads, trainable)
        return value, trainable, non_trainable, opt_vars

    micro = GLOBAL_BATCH // accumulation
    state = ([v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables],
             [v.value for v in optimizer.variables])
    x = kd.distribute_tensor(np.zeros((micro, INPUT_WIDTH), "float32"), dist.get_data_layout((micro, INPUT_WIDTH)))
    y = kd.distribute_tensor(np.zeros((micro,), "int32"), dist.get_data_layout((micro,)))
    mem = compiled_memory(jax.jit(train_step, donate_argnums=(0, 2)).lower(*state, x, y).compile())
    return {"argument": mem["argument"], "temp": mem["temp"], "weights": bytes_on_device(state[0]),
            "slots": bytes_on_device(state[2])}


def budget_mib(devices: "int | None" = None) -> int:
    """Exercise 10.1's per-device budget in MiB for ``devices`` (default :func:`devices_here`)."""
    n = devices_here() if devices is None else devices
    if n not in BUDGETS_MIB:
        raise ValueError(f"exercise 10.1 has budgets for {sorted(BUDGETS_MIB)} devices, not {n!r}; "
                         "run lesson 10 with MULTIGPU_JAX_DEVICES=2 or 4")
    return BUDGETS_MIB[n]


_CACHE: dict = {}


def measure_all(configs: "list[tuple[int, bool, int]]") -> dict:
    """``{config: {"argument", "temp", "weights", "slots"}}``, bytes per device of the 10.1 step (cached) for each
    ``(replicas, shard_weights, accumulation)``: here on JAX with enough devices, else in one fresh JAX process."""
    configs = [(int(r), bool(s), int(a)) for r, s, a in configs]
    todo = [c for c in dict.fromkeys(configs) if c not in _CACHE]
    if todo and (jax_devices_here() or 0) >= max(c[0] for c in todo):
        for c in todo:
            _CACHE[c] = _measure_here(*c)
    elif todo:
        _CACHE.update(zip(todo, run_in_jax(f"""
            import json
            from helpers.exercises.lesson10 import _measure_here
            print(json.dumps([_measure_here(*c) for c in {todo!r}]))
        """, max(c[0] for c in todo))))
    return {c: _CACHE[c] for c in configs}


def _mib(n: int) -> str:
    return f"{n / 2 ** 20:.1f} MiB"


def _check_budget(answer):
    missing = [k for k in KEYS_10_1 if k not in answer]
    if missing:
        return False, f"the dict needs the keys {list(KEYS_10_1)}; missing {missing}"
    replicas, shard, accum = answer["replicas"], answer["shard_weights"], answer["gradient_accumulation_steps"]
    n = devices_here()
    allowed = [r for r in (1, 2, 4, 8, 16, 32, 64) if r <= n]
    if replicas not in allowed or isinstance(replicas, bool):
        choices = ", ".join(map(str, allowed[:-1])) + f" or {allowed[-1]}" if len(allowed) > 1 else "1"
        return False, f"replicas={replicas!r}: use {choices} (this kernel has {n} devices)"
    if not isinstance(shard, bool):
        return False, f"shard_weights={shard!r}: give True or False"
    if not is_int(accum) or accum < 1:
        return False, f"gradient_accumulation_steps={accum!r}: give a whole number >= 1 (1 = no accumulation)"
    if GLOBAL_BATCH % (accum * replicas):
        return False, (f"a global batch of {GLOBAL_BATCH} in {accum} micro-batch(es) split over {replicas} "
                       f"replica(s) does not divide evenly; pick k so that {GLOBAL_BATCH} / k divides by {replicas}")
    budget = budget_mib(n)
    config = (int(replicas), shard, int(accum))
    m = measure_all([config])[config]
    total = m["argument"] + m["temp"]
    figures = (f"{_mib(total)} per device (weights {_mib(m['weights'])}, optimizer slots {_mib(m['slots'])}, "
               f"temp {_mib(m['temp'])})")
    if total <= budget * 2 ** 20:
        return True, (f"measured {figures}, within {budget} MiB: sharding the weights over {replicas} devices "
                      "splits the weights and Adam slots, which replicas alone never do")
    if shard and replicas == 1:
        why = "sharding over 1 device splits nothing: shard over several replicas"
    elif not shard and accum > 1:
        why = ("accumulation shrinks only the activations, which are small for this model, and adds a "
               "weight-sized accumulator; every replica still holds all weights and slots")
    elif not shard:
        why = ("every data-parallel replica holds all weights and Adam's two slots per weight; more replicas "
               "only split the activations, a small part of this model's temp (mostly full-size gradients)")
    elif replicas < n:
        why = "sharded over fewer devices, each still holds too large a slice of the weights and slots"
    else:
        why = ("accumulation adds a gradient accumulator as large as each device's slice of the weights, and the "
               "activations it saves are small for this model")
    return False, f"measured {figures} > budget {budget} MiB: {why}"


def _solve_budget():
    # Weights + Adam slots dominate this model: only sharding them (FSDP) over all N devices shrinks them enough.
    return {"replicas": devices_here(), "shard_weights": True, "gradient_accumulation_steps": 1}


register("10.1", title="fit a model into a per-device memory budget", checker=_check_budget,
         solution=_solve_budget, expects="dict",
         wants='a dict {"replicas": ..., "shard_weights": ..., "gradient_accumulation_steps": ...}',
         hint="measure where this model's bytes go (weights, slots or temp); pick the lever that shrinks "
              "the biggest column per device.")

# ---- 10.2: classify trace events -----------------------------------------------------------------

#: (name, thread, expected kind), from real XLA:CPU traces of JAX 0.7 and 0.10.
CASES_10_2 = (
    ("input", "python", "input"),
    ("all-reduce", "tf_XLAEigen/9098522094897612013", "communication"),
    ("all-reduce.1", "tf_XLAPjRtCpuClient/-1260997006963878914", "communication"),
    ("all-gather.3", "tf_XLAEigen/5971624542882991528", "communication"),
    ("reduce-scatter", "tf_XLAEigen/5971624542882991528", "communication"),
    ("fusion.2", "tf_XLAPjRtCpuClient/4019071833920093399", "compute"),
    ("dot.1", "tf_XLAPjRtCpuClient/2033840176511264804", "compute"),
    ("multiply_add_fusion", "tf_XLAPjRtCpuClient/2033840176511264804", "compute"),
    ("ThunkExecutor::Execute (wait for completion)", "tf_XLAPjRtCpuClient/1700736521859534092", None),
    ("Rendezvous", "tf_XLAEigen/9098522094897612013", None),
    ("Wait: pending_threads=1/4", "tf_XLAEigen/9098522094897612013", None),
    ("PjitFunction(step)", "python", None),
    ("$api.py:2035 device_put", "python", None),
)


def _check_kind(answer):
    wrong = []
    for name, thread, want in CASES_10_2:
        got = answer(name, thread)
        if got != want:
            wrong.append(f"kind({name!r}, {thread[:22]!r}) gave {got!r}, want {want!r}")
    if wrong:
        return False, f"{len(wrong)} of {len(CASES_10_2)} events misclassified: " + "; ".join(wrong[:3]) + (
            "; ..." if len(wrong) > 3 else "")
    return True, (f"all {len(CASES_10_2)} events right: our annotation is input, collectives are communication, "
                  "other XLA ops on XLA threads are compute, wrappers and Python are not counted")


def _solve_kind():
    def kind(name, thread):
        if name == "input":
            return "input"
        if not thread.startswith("tf_XLA") or not re.fullmatch(r"[a-z][a-z0-9_.\-]*", name):
            return None                       # Python, dispatch, runtime wrappers
        collective = re.match(r"(all-reduce|all-gather|reduce-scatter|collective-permute|all-to-all)", name)
        return "communication" if collective else "compute"
    return kind


register("10.2", title="classify the events of a profiler trace", checker=_check_kind, solution=_solve_kind,
         expects="function", takes=2, wants="a function kind(name, thread)",
         hint="XLA op names are lower case without spaces; collectives move data between devices.")
