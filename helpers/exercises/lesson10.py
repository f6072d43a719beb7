"""Exercises of 10_memory_and_profiling.

10.1 is checked by measurement: XLA's ``memory_analysis()`` of the train step the answer plans, compiled on the
lesson's N devices (Keras on JAX: the notebook's kernel; any other process measures in a fresh JAX process with
N host devices, 4 unless told, to which the answer travels as its source). Results are cached per answer.
10.2 reads the learning rate the answer's optimizer gives at each update, on any backend.
"""

from __future__ import annotations

import inspect
import math
import textwrap

import keras
import numpy as np
from keras import distribution as kd

from ..checks import is_int
from ..memory_report import bytes_on_device, compiled_memory
from . import JAX_TIME_LIMIT_S, as_int, describe, devices_here, error_line, jax_devices_here, register, run_in_jax

# ---- 10.1: fit a model into a per-device memory budget ------------------------------------------

INPUT_WIDTH = 256          #: the lesson's WIDTH: big_mlp() takes 256 features
HIDDEN = 1024              #: three hidden Dense layers this wide
GLOBAL_BATCH = 256         #: examples per weight update
#: Per-device budget (MiB, argument + temp of the compiled step) by device count N, from XLA:CPU's figures: the
#: kernels sharded over all N devices fit (N=2: 31.8 MiB; 4: 25.0, 27.5 with accumulation; 8: 21.6), the best
#: answer with fewer devices or no sharding does not (2: 39.4, 4: 31.8, 8: 25.0).
#: tests/test_exercises_lesson10.py re-measures N=2 and N=4.
BUDGETS_MIB = {2: 35, 4: 28, 8: 23}


def big_mlp(name: str = "big_mlp"):
    """The model of exercise 10.1: 256 -> 1024 -> 1024 -> 1024 -> 10, float32 (about 2.4 M parameters)."""
    return keras.Sequential([keras.Input((INPUT_WIDTH,))]
                            + [keras.layers.Dense(HIDDEN, activation="relu", name=f"d{i}") for i in (1, 2, 3)]
                            + [keras.layers.Dense(10, name="out")], name=name)


def _measure(dist, accumulation: int) -> dict:
    """Compile big_mlp's train step under ``dist`` (Keras on JAX) with ``accumulation`` micro-batches per update;
    bytes per device."""
    import jax

    with dist.scope():
        model = big_mlp()
        optimizer = keras.optimizers.Adam(1e-3, gradient_accumulation_steps=accumulation if accumulation > 1 else None)
        optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def train_step(weights, opt_vars, x, y):
        def loss(w):
            return loss_fn(y, model.stateless_call(w, [], x, training=True)[0])

        value, grads = jax.value_and_grad(loss)(weights)
        weights, opt_vars = optimizer.stateless_apply(opt_vars, grads, weights)
        return value, weights, opt_vars

    micro = GLOBAL_BATCH // accumulation
    state = ([v.value for v in model.trainable_variables], [v.value for v in optimizer.variables])
    x = kd.distribute_tensor(np.zeros((micro, INPUT_WIDTH), "float32"), dist.get_data_layout((micro, INPUT_WIDTH)))
    y = kd.distribute_tensor(np.zeros((micro,), "int32"), dist.get_data_layout((micro,)))
    mem = compiled_memory(jax.jit(train_step, donate_argnums=(0, 1)).lower(*state, x, y).compile())
    return {"argument": mem["argument"], "temp": mem["temp"], "weights": bytes_on_device(state[0]),
            "slots": bytes_on_device(state[1]), "full_weights": 4 * model.count_params()}


def _facts_here(fn, n: int) -> dict:
    """What ``fn(devices)`` plans on this process's first ``n`` JAX devices, measured; or the error it raised."""
    try:
        got = fn(kd.list_devices()[:n])
        if not (isinstance(got, tuple) and len(got) == 2):
            raise TypeError(f"plan(devices) must return (distribution, k), it returned {describe(got)}")
        dist, k = got
        if not (hasattr(dist, "scope") and hasattr(dist, "device_mesh")):
            raise TypeError(f"the distribution is {describe(dist)}, not a keras.distribution (DataParallel, ...)")
        if not is_int(k) or k < 1 or GLOBAL_BATCH % k:
            raise ValueError(f"k={k!r}: give a whole number of micro-batches that divides {GLOBAL_BATCH} (1: none)")
        facts = _measure(dist, int(k))
    except Exception as exc:  # the learner's plan fails: that is the verdict
        return {"n": n, "error": error_line(exc, 300)}
    return {"n": n, "error": None, "k": int(k), "kind": type(dist).__name__,
            "devices": int(np.prod(dist.device_mesh.shape)), **facts}


_CACHE: dict = {}


def facts(fns: list, n: "int | None" = None) -> list[dict]:
    """:func:`_facts_here` for each answer: here in lesson 10's kernel, else all in one fresh JAX process (cached
    per source and N), which re-creates each function from its source (kd, keras, np and big_mlp defined)."""
    n = devices_here() if n is None else n
    if (jax_devices_here() or 0) >= n:
        return [_facts_here(fn, n) for fn in fns]
    try:
        jobs = [(textwrap.dedent(inspect.getsource(fn)), fn.__name__) for fn in fns]
    except (OSError, TypeError):
        raise ValueError("cannot read this function's source: define it in a cell or a file") from None
    todo = list(dict.fromkeys(job for job in jobs if (job, n) not in _CACHE))
    if todo:
        _CACHE.update(zip([(job, n) for job in todo], run_in_jax(f"""
            import json, keras, numpy as np
            from keras import distribution as kd
            from helpers.exercises.lesson10 import _facts_here, big_mlp
            out = []
            for src, name in {todo!r}:
                namespace = dict(kd=kd, keras=keras, np=np, big_mlp=big_mlp)
                exec(src, namespace)
                out.append(_facts_here(namespace[name], {n}))
            print(json.dumps(out))
        """, n)))
    return [_CACHE[(job, n)] for job in jobs]


def budget_mib(devices: "int | None" = None) -> int:
    """Exercise 10.1's per-device budget in MiB for ``devices`` (default :func:`devices_here`)."""
    n = devices_here() if devices is None else devices
    if n not in BUDGETS_MIB:
        raise ValueError(f"exercise 10.1 has budgets for {sorted(BUDGETS_MIB)} devices, not {n!r}; "
                         "run lesson 10 with MULTIGPU_JAX_DEVICES=2 or 4")
    return BUDGETS_MIB[n]


def _mib(n: int) -> str:
    return f"{n / 2 ** 20:.1f} MiB"


def _check_budget(answer):
    """Measured on the lesson's N devices, then on 2 as well where N > 2 (an answer must read ``len(devices)``)."""
    n = devices_here()
    ok, message = _judge_budget(answer, n)
    if ok and n > 2:
        again, why = _judge_budget(answer, 2)
        if not again:
            return False, f"right on {n} devices, but on 2: {why}. Does plan read len(devices)?"
        message += "; on 2 devices it fits too"
    return ok, message


def _judge_budget(answer, n: int) -> "tuple[bool, str]":
    budget = budget_mib(n)
    [f] = facts([answer], n)
    if f["error"]:
        return False, f"your plan fails on {n} devices: {f['error']}"
    total, replicas, k = f["argument"] + f["temp"], f["devices"], f["k"]
    shard = f["weights"] < f["full_weights"]
    figures = (f"{_mib(total)} per device (weights {_mib(f['weights'])}, optimizer slots {_mib(f['slots'])}, "
               f"temp {_mib(f['temp'])}) with a {f['kind']} over {replicas} device(s) and k={k}")
    if total <= budget * 2 ** 20:
        return True, (f"measured {figures}, within {budget} MiB: sharding the weights over {replicas} devices "
                      "splits the weights and Adam slots, which replicas alone never do")
    if not shard and replicas == 1:
        why = "a distribution over 1 device splits nothing: spread it over several devices"
    elif not shard and f["kind"] == "ModelParallel":
        why = ("your ModelParallel shards no kernel: every device holds them whole (does a LayoutMap key match "
               "the whole path of each kernel?)")
    elif not shard and k > 1:
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
    def plan(devices):
        # Weights + Adam slots dominate this model: only sharding them (FSDP) over all the devices shrinks them.
        mesh = kd.DeviceMesh((len(devices),), ("batch",), devices)
        layout_map = kd.LayoutMap(mesh)
        layout_map[".*kernel"] = ("batch", None)
        return kd.ModelParallel(layout_map=layout_map, batch_dim_name="batch"), 1

    return plan


register("10.1", title="plan a step that fits a per-device memory budget", checker=_check_budget,
         solution=_solve_budget, expects="function", takes=1, time_limit=JAX_TIME_LIMIT_S,
         wants="a function plan(devices) that returns (distribution, gradient_accumulation_steps)",
         hint="measure where this model's bytes go (weights, slots or temp); pick the lever that shrinks "
              "the biggest column per device.",
         giveaways=['"shard_weights": True', "ModelParallel", "FSDP"], slow=True)

# ---- 10.2: find and fix - a schedule that counts micro-steps -------------------------------------

#: The model's old schedule, in updates of a global batch of 256; now 4 micro-batches of 64 make one update.
WARMUP_UPDATES, DECAY_UPDATES, PEAK, MICRO_BATCHES = 100, 1000, 1e-3, 4


def _rates(optimizer, updates) -> list[float]:
    """The learning rate ``optimizer`` uses at each update (its raw counter at ``update * k`` micro-steps)."""
    k = optimizer.gradient_accumulation_steps or 1
    out = []
    for u in updates:
        optimizer._iterations.assign(u * k)      # the counter a schedule reads: micro-steps
        out.append(float(optimizer.learning_rate))
    optimizer._iterations.assign(0)
    return out


def _check_schedule(answer):
    optimizer = answer()
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        return False, f"make_optimizer() must return a Keras optimizer, it returned {describe(optimizer)}"
    k = optimizer.gradient_accumulation_steps
    k = as_int("gradient_accumulation_steps", k) if is_int(k) else k      # a plain int: no answer's own ==
    if k != MICRO_BATCHES:
        return False, f"gradient_accumulation_steps is {k!r}: keep {MICRO_BATCHES} micro-batches of 64 per update"
    updates = list(range(0, WARMUP_UPDATES + DECAY_UPDATES + 101, 5))
    old = keras.optimizers.schedules.CosineDecay(0.0, decay_steps=DECAY_UPDATES, warmup_target=PEAK,
                                                 warmup_steps=WARMUP_UPDATES)
    want, got = [float(old(u)) for u in updates], _rates(optimizer, updates)
    if all(math.isclose(g, w, rel_tol=1e-4, abs_tol=1e-9) for g, w in zip(got, want)):
        return True, (f"every update gets its old learning rate: the schedule counts micro-steps, so its warm-up "
                      f"and decay are {MICRO_BATCHES} x longer, and 4 micro-batches of 64 still average the old "
                      f"batch of 256, so the peak stays {PEAK:g}")
    wrong = []
    if max(got) > PEAK * 1.001:
        wrong.append(f"the learning rate peaks at {max(got):.2g}: 4 micro-batches of 64 still make one update of "
                     f"256 examples, the old global batch, so keep the old peak ({PEAK:g})")
    peak_at = updates[int(np.argmax(got))]
    if peak_at != WARMUP_UPDATES:
        wrong.append(f"the warm-up ends after {peak_at} updates, not {WARMUP_UPDATES}: a schedule counts "
                     "micro-steps (the optimizer's raw counter), not updates")
    end = next((u for u, g in zip(updates, got) if u > peak_at and g <= 1e-12), None)
    if end != WARMUP_UPDATES + DECAY_UPDATES:
        wrong.append(f"the decay ends after {end or 'more than ' + str(updates[-1])} updates, not "
                     f"{WARMUP_UPDATES + DECAY_UPDATES}")
    if not wrong:
        u = next(u for u, g, w in zip(updates, got, want) if not math.isclose(g, w, rel_tol=1e-4, abs_tol=1e-9))
        wrong.append(f"at update {u} the learning rate is {got[updates.index(u)]:.3g}, it was {old(u):.3g}")
    return False, "; ".join(wrong)


def _solve_schedule():
    def make_optimizer():
        schedule = keras.optimizers.schedules.CosineDecay(    # in micro-steps: 4 per update
            0.0, decay_steps=1000 * 4, warmup_target=1e-3, warmup_steps=100 * 4)   # the old peak: same batch
        return keras.optimizers.Adam(schedule, gradient_accumulation_steps=4)

    return make_optimizer


register("10.2", title="find and fix: a schedule under gradient accumulation", checker=_check_schedule,
         solution=_solve_schedule, expects="function", takes=0,
         wants="a function make_optimizer() that returns a Keras optimizer: your fixed version",
         hint="what does a schedule count when the optimizer accumulates? and how many examples does one "
              "update average, before and after?",
         giveaways=["* 4", "4000", "warmup_steps=400", "1e-3"])
