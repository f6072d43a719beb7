"""Exercises 11.1 (write a layout map), 11.2 (fix a LoRA + ModelParallel setup) and 11.3 (a map for Mistral, which
keras-hub ships none for): a right, a wrong and an unattempted answer each, checked as lesson 11's kernel checks them: on the devices, with Keras on JAX.

This test process runs TensorFlow, so each device count (4, the lesson's default, and 2, Kaggle's T4 x2) gets
one fresh JAX subprocess that builds the lesson's tiny Gemma under every answer and prints the verdicts.
"""

import json

import pytest

from helpers import exercises
from helpers.subproc import run_python

VERDICTS = '''
import json
from keras import distribution as kd
from helpers import exercises
from helpers.exercises.lesson11 import tiny_gemma

def kv_split(mesh):                      # 11.1, wrong: one rule splits the single K/V head
    m = kd.LayoutMap(mesh)
    m["token_embedding/embeddings"] = ("model", "batch")
    m[".*attention/(query|key|value)/kernel"] = ("model", "batch", None)
    m[".*attention_output/kernel"] = ("model", None, "batch")
    m[".*ffw_gating(_2)?/kernel"] = ("batch", "model")
    m[".*ffw_linear/kernel"] = ("model", "batch")
    return m

def greedy(mesh):                        # 11.1, wrong: '.*kernel' keys reach lora_kernel_* under re.search
    m = kd.LayoutMap(mesh)
    m["token_embedding/embeddings"] = ("model", "batch")
    m["decoder_block.*attention.*query.*kernel"] = ("model", "batch", None)
    m["decoder_block.*attention.*(key|value).*kernel"] = (None, "batch", None)
    m["decoder_block.*attention_output.*kernel"] = ("model", None, "batch")
    m["decoder_block.*ffw_gating.*kernel"] = ("batch", "model")
    m["decoder_block.*ffw_linear.*kernel"] = ("model", "batch")
    return m

def lora_outside(mesh):                  # 11.2, wrong: right keys, but enable_lora outside the scope
    m = exercises.get("11.1").solution()(mesh)
    dist = kd.ModelParallel(layout_map=m, batch_dim_name="batch")
    with dist.scope():
        lm = tiny_gemma()
    lm.backbone.enable_lora(rank=4)
    return m, lm

def gemma_style(mesh):                   # 11.3, wrong: Gemma's axes on Mistral, whose heads sit on axis 1
    m = kd.LayoutMap(mesh)
    m["token_embedding/embeddings"] = ("model", "batch")
    m[".*self_attention/query/kernel"] = ("model", "batch", None)
    m[".*self_attention/(key|value)/kernel"] = (None, "batch", None)
    m[".*self_attention/attention_output/kernel"] = ("model", None, "batch")
    m[".*feedforward_(intermediate|gate)_dense/kernel"] = ("batch", "model")
    m[".*feedforward_output_dense/kernel"] = ("model", "batch")
    return m

out = {}
for key, answers in (("11.3", {"right": exercises.get("11.3").solution(), "gemma": gemma_style, "todo": ...}),
                     ("11.1", {"right": exercises.get("11.1").solution(), "kv": kv_split, "greedy": greedy,
                                "todo": ...}),
                     ("11.2", {"right": exercises.get("11.2").solution(), "outside": lora_outside, "todo": ...})):
    for name, answer in answers.items():
        out[f"{key} {name}"] = exercises.verdict(key, answer)
print(json.dumps(out))
'''


@pytest.fixture(scope="module", params=[4, 2], ids=["4 devices", "2 devices"])
def verdicts(request):
    run = run_python(VERDICTS, env={"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
                                    "XLA_FLAGS": f"--xla_force_host_platform_device_count={request.param}"},
                     timeout=600, echo=False)
    assert run.ok, run.stderr[-3000:]
    return request.param, json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_right_answers_pass_on_the_devices(verdicts):
    n, v = verdicts
    for key in ("11.1", "11.2", "11.3"):
        ok, text = v[f"{key} right"]
        assert ok, text
        assert "(1, %d)" % n in text and (("(2, %d)" % (n // 2) in text) == (n >= 4))


def test_wrong_answers_say_why(verdicts):
    _, v = verdicts
    ok, text = v["11.1 kv"]
    assert not ok and "single K/V head" in text and "keep it whole" in text, text
    ok, text = v["11.1 greedy"]
    assert not ok and "reach" in text and "LoRA weights" in text and "lora_kernel" in text, text
    ok, text = v["11.2 outside"]
    assert not ok and "on 1 of" in text and "inside the distribution's scope" in text, text
    ok, text = v["11.3 gemma"]
    assert not ok and "self_attention/query/kernel" in text and "axis 1 (heads)" in text, text
    assert "reverse_embeddings" in text or "and " in text, text


def test_unattempted_costs_nothing(verdicts):
    _, v = verdicts
    for key in ("11.1", "11.2", "11.3"):
        ok, text = v[f"{key} todo"]
        assert not ok and text.startswith(f"Exercise {key}: not attempted yet."), text
    assert exercises.verdict("11.1", ...)[0] is False    # here too: no build, no subprocess


def test_broken_setup_of_the_notebook_fails_to_build():
    """The notebook's 11.2 starting point is wrong on every stack: its (query|key|value) rule splits the K/V head."""
    from helpers.exercises import lesson11

    facts = [{"mesh": [1, 2], "error": "IndivisibleError: ... partitioned 2 times, but the dimension size is 1"}]
    ok, text = lesson11._judge(facts, 2)
    assert not ok and "building with LoRA on the (1, 2) mesh fails" in text
