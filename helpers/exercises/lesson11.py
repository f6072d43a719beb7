"""Exercises of 11_finetune_llm_across_devices, checked on the devices.

The checker builds the lesson's tiny Gemma (11.1, 11.2), or a tiny Mistral (11.3: a family keras-hub ships no
layout map for), with LoRA under the answer's layout on a ``(1, N)`` mesh (and ``(2, N // 2)`` where N >= 4) and
reads every weight's sharding: in lesson 11's kernel (Keras on JAX), else in a fresh JAX process with N host
devices (4 unless told), to which the answer travels as its source.
"""

from __future__ import annotations

import functools
import inspect
import re
import textwrap

import keras
from keras import distribution as kd

from . import JAX_TIME_LIMIT_S, devices_here, jax_devices_here, register, run_in_jax

VOCAB = 16                 #: the lesson's sentencepiece vocabulary
HEADS, HEAD_DIM, HIDDEN, FFW, LAYERS, RANK = 8, 8, 64, 256, 2, 4

#: What a right layout gives decoder_block_0's kernels: the dimension split over "model" (None: never "model").
MODEL_DIM = {"attention/query/kernel": 0, "attention/attention_output/kernel": 0, "ffw_gating/kernel": 1,
             "ffw_gating_2/kernel": 1, "ffw_linear/kernel": 0, "attention/key/kernel": None,
             "attention/value/kernel": None}


def tiny_gemma(vocabulary_size: int = VOCAB, seed: int = 11):
    """The lesson's model: a 2-layer GemmaCausalLM, 8 query heads and 1 key/value head (as gemma_2b_en)."""
    import keras_hub

    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.GemmaBackbone(
        vocabulary_size=vocabulary_size, num_layers=LAYERS, num_query_heads=HEADS, num_key_value_heads=1,
        hidden_dim=HIDDEN, intermediate_dim=FFW, head_dim=HEAD_DIM)
    return keras_hub.models.GemmaCausalLM(backbone=backbone, preprocessor=None)


#: What a right layout gives transformer_layer_0 of tiny_mistral() (and its embeddings): the dimension split over
#: "model" (None: never "model"). Mistral keeps the heads on axis 1 of query/key/value, axis 0 of the output.
MISTRAL_MODEL_DIM = {"token_embedding/embeddings": 0, "token_embedding/reverse_embeddings": 1,
                     "transformer_layer_0/self_attention/query/kernel": 1,
                     "transformer_layer_0/self_attention/key/kernel": None,
                     "transformer_layer_0/self_attention/value/kernel": None,
                     "transformer_layer_0/self_attention/attention_output/kernel": 0,
                     "transformer_layer_0/feedforward_intermediate_dense/kernel": 1,
                     "transformer_layer_0/feedforward_gate_dense/kernel": 1,
                     "transformer_layer_0/feedforward_output_dense/kernel": 0}
WHAT = {0: "rows", 1: "columns"}


def tiny_mistral(seed: int = 11):
    """A 2-layer KerasHub Mistral (no ``get_layout_map``): 8 query heads and 2 key/value heads, width 64, a
    vocabulary of 16 with separate input and output embeddings; exercise 11.3's model."""
    import keras_hub

    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.MistralBackbone(vocabulary_size=VOCAB, num_layers=LAYERS, num_query_heads=HEADS,
                                                num_key_value_heads=2, hidden_dim=HIDDEN, intermediate_dim=FFW,
                                                sliding_window=8)
    return keras_hub.models.MistralCausalLM(backbone=backbone, preprocessor=None)


def lora_paths() -> list[str]:
    """Paths of the LoRA weights ``enable_lora`` adds to ``tiny_gemma()`` (query and value of each layer)."""
    return [f"decoder_block_{i}/attention/{name}/lora_kernel_{ab}"
            for i in range(LAYERS) for name in ("query", "value") for ab in "ab"]


def _facts_here(kind: str, fn, n: int) -> list[dict]:
    """Build with the answer on each mesh (this process: Keras on JAX, >= n devices); what came out, as data."""
    out = []
    for shape in [(1, n)] + ([(2, n // 2)] if n >= 4 else []):
        mesh = kd.DeviceMesh(shape, ("batch", "model"), kd.list_devices()[:n])
        facts = {"mesh": list(shape), "error": None}
        try:
            if kind == "mistral":
                layout_map = fn(mesh)
                if not isinstance(layout_map, kd.LayoutMap):
                    raise TypeError(f"layout_for_mistral(mesh) returned {type(layout_map).__name__}, not a LayoutMap")
                with kd.ModelParallel(layout_map=layout_map, batch_dim_name="batch").scope():
                    lm = tiny_mistral()
                    lm.backbone.enable_lora(rank=RANK)
            elif kind == "write":
                layout_map = fn(mesh)
                if not isinstance(layout_map, kd.LayoutMap):
                    raise TypeError(f"layout_for(mesh) returned {type(layout_map).__name__}, not a LayoutMap")
                with kd.ModelParallel(layout_map=layout_map, batch_dim_name="batch").scope():
                    lm = tiny_gemma()
                    lm.backbone.enable_lora(rank=RANK)
            else:
                got = fn(mesh)
                if not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], kd.LayoutMap)):
                    raise TypeError("setup(mesh) must return (layout_map, causal_lm)")
                layout_map, lm = got
        except Exception as exc:  # the learner's layout fails to build: that is the verdict
            first = str(exc).splitlines()[0] if str(exc) else ""
            # JAX 0.7's wording names the mesh twice before "rank at least": keep that part in the short message
            rank = re.search(r"is only valid for values of rank at least \d+.*", first)
            facts["error"] = f"{type(exc).__name__}: {first[:300]}" + (f" ... {rank.group(0)[:120]}" if rank and
                                                                          rank.start() >= 300 else "")
        else:
            facts["keys"] = list(layout_map)
            facts["weights"] = {v.path: [list(getattr(v.value.sharding, "spec", ())),   # one device: no spec
                                         list(v.value.sharding.shard_shape(v.shape)), len(v.value.sharding.device_set)]
                                for v in lm.backbone.weights}
            facts["trainable"] = [v.path for v in lm.trainable_weights]
        out.append(facts)
    return out


_CACHE: dict = {}


def facts(kind: str, fn, n: "int | None" = None) -> list[dict]:
    """What building with answer ``fn`` gives on each mesh of N devices (cached per source and N): here in lesson
    11's kernel, else in a fresh JAX process, which re-creates ``fn`` from its source (kd, keras, keras_hub,
    tiny_gemma and np defined)."""
    n = devices_here() if n is None else n
    try:
        src = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        src = None
    key = (kind, src or id(fn), n)
    if key in _CACHE:
        return _CACHE[key]
    if (jax_devices_here() or 0) >= n:
        result = _facts_here(kind, fn, n)
    else:
        if src is None:
            raise ValueError("cannot read this function's source: define it in a cell or a file")
        result = run_in_jax(f"""
            import json, keras, keras_hub, numpy as np
            from keras import distribution as kd
            from helpers.exercises.lesson11 import _facts_here, tiny_gemma, tiny_mistral
            namespace = dict(kd=kd, keras=keras, keras_hub=keras_hub, tiny_gemma=tiny_gemma, tiny_mistral=tiny_mistral, np=np)
            exec({src!r}, namespace)
            fn = namespace[{fn.__name__!r}]
            print(json.dumps(_facts_here({kind!r}, fn, {n})))
        """, n)
    _CACHE[key] = result
    return result


def _judge(all_facts: list[dict], n: int) -> "tuple[bool, str]":
    for f in all_facts:
        where = f"on the {tuple(f['mesh'])} mesh"
        if f["error"]:
            why = ""
            if re.search(r"(size is|equal to) 1\b", f["error"]):
                why = " (a dimension of size 1, the single K/V head, cannot be split over 'model': keep it whole)"
            elif "rank at least" in f["error"]:
                why = (" (a 3-axis rule was applied to a 2-axis weight: the key(s) reach LoRA weights, lora_kernel_*; "
                       "end kernel keys so that 'lora_kernel_a' cannot match)")
            return False, f"building with LoRA {where} fails{why}: {f['error']}"
        weights, wrong = f["weights"], []
        # the LoRA paths some key reaches under Keras <= 3.13 (re.search) or >= 3.14 (re.fullmatch)
        caught = [p for p in lora_paths() if any(re.search(k, p) or re.fullmatch(k, p) for k in f["keys"])]
        if caught:
            wrong.append(f"the key(s) reach {len(caught)} LoRA weights on some Keras version (e.g. {caught[0]}); "
                         "end kernel keys so that 'lora_kernel_a' cannot match")
        for path in lora_paths():
            spec, _, on = weights[path]
            if any(spec) or on != n:
                wrong.append(f"{path} is {spec} on {on} of {n} devices; adapters belong whole on every device "
                             "(enable_lora inside the distribution's scope)")
                break
        for short, dim in MODEL_DIM.items():
            spec, per_device, _ = weights[f"decoder_block_0/{short}"]
            spec = spec + [None] * 3
            if dim is None and "model" in spec:
                wrong.append(f"{short} has 1 head: keep it whole on 'model', got {spec[:3]}")
            elif dim is not None and spec[dim] != "model":
                wrong.append(f"{short} should split dimension {dim} over 'model' "
                             f"({'heads' if 'attention' in short else 'columns' if 'gating' in short else 'rows'}), "
                             f"got {spec[:len(per_device)]}")
        emb_spec = weights["token_embedding/embeddings"][0] + [None]
        if emb_spec[0] != "model":
            wrong.append(f"token_embedding/embeddings should split its rows over 'model', got {emb_spec[:2]}")
        not_lora = [p for p in f["trainable"] if "lora_kernel" not in p]
        if not_lora or not f["trainable"]:
            wrong.append(f"only the LoRA weights should train, trainable: {not_lora[:2] or 'none'}")
        if wrong:
            return False, f"{where}: " + "; ".join(wrong)
    meshes = " and ".join(str(tuple(f["mesh"])) for f in all_facts)
    return True, (f"built with LoRA on {meshes}: heads, MLP columns/rows and embedding rows split over 'model', "
                  "the single K/V head and the adapters whole on every device, and no key reaches a LoRA weight "
                  "under Keras 3.13's search or 3.14's full match")


# ---- 11.1: write a layout map -------------------------------------------------------------------

def _judge_mistral(all_facts: list[dict], n: int) -> "tuple[bool, str]":
    for f in all_facts:
        where = f"on the {tuple(f['mesh'])} mesh"
        if f["error"]:
            why = (" (a dimension that does not divide over 'model': the 2 key/value heads on 4 devices? keep them "
                   "whole)" if re.search(r"(divisible by|partitioned) \d", f["error"]) else "")
            return False, f"building with LoRA {where} fails{why}: {f['error']}"
        weights, wrong = f["weights"], []
        lora = [p for p in weights if "lora_kernel" in p]
        caught = [p for p in lora if any(re.search(k, p) or re.fullmatch(k, p) for k in f["keys"])]
        if caught:
            wrong.append(f"the key(s) reach {len(caught)} LoRA weights on some Keras version (e.g. {caught[0]})")
        spread = [p for p in lora if any(weights[p][0]) or weights[p][2] != n]
        if spread:
            wrong.append(f"{spread[0]} is not whole on every device")
        for path, dim in MISTRAL_MODEL_DIM.items():
            spec = weights[path][0] + [None] * 3
            shape = len(weights[path][1])
            if dim is None and "model" in spec:
                wrong.append(f"{path} has 2 heads: keep them whole on 'model', got {spec[:shape]}")
            elif dim is not None and spec[dim] != "model":
                what = "heads" if "attention" in path else ("vocabulary" if "embedding" in path else WHAT[dim])
                wrong.append(f"{path} {tuple(weights[path][1])} per device should split axis {dim} ({what}) over "
                             f"'model', got {spec[:shape]}")
        if wrong:
            return False, f"{where}: " + "; ".join(wrong[:3]) + (f" (and {len(wrong) - 3} more)" if len(wrong) > 3 else "")
    meshes = " and ".join(str(tuple(f["mesh"])) for f in all_facts)
    return True, (f"built with LoRA on {meshes}: vocabulary, query and output heads and the MLP's inner width split "
                  "over 'model', the 2 key/value heads and the adapters whole, and no key reaches a LoRA weight")


def _check(kind, answer):
    n = devices_here()
    judge = _judge_mistral if kind == "mistral" else _judge
    return judge(facts(kind, answer, n), n)


def _solve_write():
    def layout_for(mesh):
        from keras import distribution as kd

        layout_map = kd.LayoutMap(mesh)
        layout_map["token_embedding/embeddings"] = ("model", "batch")
        layout_map[".*attention/query/kernel"] = ("model", "batch", None)            # split by heads
        layout_map[".*attention/(key|value)/kernel"] = (None, "batch", None)          # 1 head: whole
        layout_map[".*attention_output/kernel"] = ("model", None, "batch")
        layout_map[".*ffw_gating(_2)?/kernel"] = ("batch", "model")                   # columns
        layout_map[".*ffw_linear/kernel"] = ("model", "batch")                        # rows
        return layout_map
    return layout_for


register("11.1", title="a layout map for the lesson's Gemma, on the devices",
         checker=functools.partial(_check, "write"), solution=_solve_write, expects="function", takes=1,
         time_limit=JAX_TIME_LIMIT_S,
         wants="a function layout_for(mesh) that returns a keras.distribution.LayoutMap",
         hint="one key per kernel family; a key that ends right after 'kernel' with a '/' before it cannot "
              "reach 'lora_kernel_a'; a dimension of size 1 cannot be split.",
         giveaways=["(None, 'batch', None)", "/kernel", "(key|value)"], slow=True)

# ---- 11.2: fix a broken LoRA + ModelParallel setup ----------------------------------------------


def _solve_fix():
    def setup(mesh):
        from keras import distribution as kd

        layout_map = kd.LayoutMap(mesh)
        layout_map["token_embedding/embeddings"] = ("model", "batch")
        layout_map["decoder_block.*attention/query/kernel"] = ("model", "batch", None)
        layout_map["decoder_block.*attention/(key|value)/kernel"] = (None, "batch", None)  # 1 K/V head
        layout_map["decoder_block.*attention_output/kernel"] = ("model", None, "batch")
        layout_map["decoder_block.*ffw_gating.*/kernel"] = ("batch", "model")     # '/kernel': not lora_kernel
        layout_map["decoder_block.*ffw_linear/kernel"] = ("model", "batch")
        distribution = kd.ModelParallel(layout_map=layout_map, batch_dim_name="batch")
        with distribution.scope():
            lm = tiny_gemma()
            lm.backbone.enable_lora(rank=4)                                       # inside the scope
        return layout_map, lm
    return setup


register("11.2", title="fix a LoRA + ModelParallel setup", checker=functools.partial(_check, "fix"),
         solution=_solve_fix, expects="function", takes=1, time_limit=JAX_TIME_LIMIT_S,
         wants="a function setup(mesh) that returns (layout_map, causal_lm)",
         hint="three things are wrong: what one rule does to a single head, what '.*kernel' can reach, and "
              "where the LoRA weights are created.",
         giveaways=["inside the scope", "/kernel", "(key|value)"], slow=True)


# ---- 11.3: write the map for another architecture ------------------------------------------------


def _solve_mistral():
    def layout_for_mistral(mesh):
        from keras import distribution as kd

        layout_map = kd.LayoutMap(mesh)
        layout_map["token_embedding/embeddings"] = ("model", "batch")                 # vocabulary rows
        layout_map["token_embedding/reverse_embeddings"] = ("batch", "model")         # vocabulary columns
        layout_map[".*self_attention/query/kernel"] = ("batch", "model", None)        # heads: axis 1 here
        layout_map[".*self_attention/(key|value)/kernel"] = ("batch", None, None)     # 2 heads: whole
        layout_map[".*self_attention/attention_output/kernel"] = ("model", None, "batch")
        layout_map[".*feedforward_(intermediate|gate)_dense/kernel"] = ("batch", "model")
        layout_map[".*feedforward_output_dense/kernel"] = ("model", "batch")
        return layout_map
    return layout_for_mistral


register("11.3", title="a layout map for an architecture without one (Mistral)",
         checker=functools.partial(_check, "mistral"), solution=_solve_mistral, expects="function", takes=1,
         time_limit=JAX_TIME_LIMIT_S,
         wants="a function layout_for_mistral(mesh) that returns a keras.distribution.LayoutMap",
         hint="read each kernel's shape: which axis has 8 (heads), 16 (vocabulary) or 256 (the MLP's width)? That "
              "axis goes on 'model'; 2 heads do not divide 4 devices.",
         giveaways=["(\"batch\", \"model\", None)", "reverse_embeddings\"] = (\"batch\", \"model\")", "axis 1 of query"],
         slow=True)
