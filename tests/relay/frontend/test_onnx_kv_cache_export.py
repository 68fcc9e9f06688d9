"""A GPT-2 decoder step with a KV cache as optimum exports it (``relay.testing.exported_transformers.
gpt2_kv_decoder``: past_key_values inputs, present outputs, positions from the cache's length,
a causal mask sliced at run-time starts, a padding mask). In generation every step is a new
signature (the past grows by one): compiled once with no shapes, it must run the prefill
(past 0), batches with left padding and each decode step as onnxruntime does."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import SUMS, compare, run_ort

import ember
from ember.contrib import cc
from ember.relay.testing.exported_transformers import gpt2_kv_decoder, kv_cache_feeds

SMALL = {"hidden": 32, "heads": 2, "layers": 2, "vocab": 50, "max_pos": 64}


def test_kv_cache_decoder_runs_prefill_and_every_decode_step():
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    model = gpt2_kv_decoder(**SMALL)
    names = [i.name for i in model.graph.input]
    run = ember.compile(model)
    rng = np.random.default_rng(7)
    shapes = [(1, 8, 0, 0), (2, 5, 0, 0), (2, 1, 6, 2), (3, 4, 11, 3)]
    shapes += [(1, 1, past, 0) for past in range(8, 20)]  # a generation loop
    for batch, seq, past, pad in shapes:
        feeds = kv_cache_feeds(model, batch, seq, past, rng, pad)
        got = run(*[feeds[k] for k in names])
        compare(f"gpt2 kv {batch}x{seq} past {past}", list(got), run_ort(model, feeds), SUMS)
