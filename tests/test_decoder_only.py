"""attnbook.decoder_only: held equal to the `transformers` GPT-2; its cache, its sampling filters, its errors."""

from __future__ import annotations

import pytest
import torch
from gpt2_twins import gpt2_twins

from attnbook.decoder_only import (
    DecoderOnlyConfig,
    DecoderOnlyTransformer,
    cache_numbers,
    generate,
    next_token_loss,
    pair_sequences,
    parameter_count,
    prefix_mask,
    rotate_pairs,
    sample_next,
    top_k_filter,
    top_p_filter,
    translate_greedy,
    translation_loss,
)

F64 = {"rtol": 1e-10, "atol": 1e-10}


def small(**changes) -> DecoderOnlyConfig:
    settings = dict(vocab_size=37, d_model=24, num_heads=4, num_layers=2, d_ff=48, max_len=40)
    settings.update(changes)
    return DecoderOnlyConfig(**settings)


def model_of(config: DecoderOnlyConfig, seed: int = 0) -> DecoderOnlyTransformer:
    torch.manual_seed(seed)
    return DecoderOnlyTransformer(config).double().eval()


# --- Equal to an established implementation: GPT-2 ----------------------------------------------


@pytest.fixture(scope="module")
def gpt2_pair():
    pytest.importorskip("transformers")
    return gpt2_twins(53, d_model=48, num_heads=4, num_layers=3, max_len=32)


def test_the_logits_equal_gpt2s_with_the_same_weights_in_float64(gpt2_pair):
    ours, theirs = gpt2_pair
    tokens = torch.randint(0, 53, (3, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(ours(tokens), theirs(tokens).logits, **F64)


def test_the_parameter_count_equals_gpt2s(gpt2_pair):
    ours, theirs = gpt2_pair
    assert parameter_count(ours.config) == sum(p.numel() for p in ours.parameters())
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())


def test_greedy_generation_gives_gpt2s_tokens(gpt2_pair):
    ours, theirs = gpt2_pair
    prompt = torch.randint(3, 53, (2, 5), generator=torch.Generator().manual_seed(2))
    mine = generate(ours, prompt, 12)
    with torch.no_grad():
        reference = theirs.generate(prompt, max_new_tokens=12, do_sample=False, pad_token_id=0, eos_token_id=None)
    assert mine.tolist() == reference.tolist()


def test_gpt2_sizes_from_their_configurations():
    sizes = {(768, 12, 12): 124_439_808, (1024, 24, 16): 354_823_168, (1280, 36, 20): 774_030_080}
    for (d, layers, heads), count in sizes.items():
        config = DecoderOnlyConfig(50257, d_model=d, num_heads=heads, num_layers=layers, d_ff=4 * d, max_len=1024)
        assert parameter_count(config) == count
    xl = DecoderOnlyConfig(50257, d_model=1600, num_heads=25, num_layers=48, d_ff=6400, max_len=1024)
    assert parameter_count(xl) == 1_557_611_200


# --- The cache -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes", [{}, {"positions": "rotary"}, {"num_kv_heads": 2}, {"positions": "rotary", "num_kv_heads": 1}]
)
def test_cached_steps_give_the_logits_of_the_whole_sequence(changes):
    model = model_of(small(**changes))
    tokens = torch.randint(0, 37, (2, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        whole = model(tokens)
        logits, state = model.start(tokens[:, :4])
        got = [logits]
        for t in range(4, 12):
            logits, state = model.step(tokens[:, t], state)
            got.append(logits)
    torch.testing.assert_close(torch.stack(got, dim=1), whole[:, 3:], **F64)
    assert parameter_count(model.config) == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("changes", [{}, {"positions": "rotary", "num_kv_heads": 2}])
def test_cached_and_uncached_generation_give_the_same_tokens(changes):
    model = model_of(small(**changes))
    prompt = torch.randint(3, 37, (3, 4), generator=torch.Generator().manual_seed(4))
    for options in ({}, {"temperature": 0.8, "top_k": 5}, {"temperature": 1.2, "top_p": 0.9}):
        cached = generate(model, prompt, 15, generator=torch.Generator().manual_seed(5), **options)
        uncached = generate(model, prompt, 15, generator=torch.Generator().manual_seed(5), cache=False, **options)
        assert cached.tolist() == uncached.tolist()
        assert cached.shape == (3, 19)


def test_a_grouped_query_cache_is_smaller_by_the_group_size():
    prompt = torch.randint(3, 37, (2, 6), generator=torch.Generator().manual_seed(6))
    sizes = {}
    for kv in (4, 2, 1):
        model = model_of(small(num_kv_heads=kv))
        _, state = model.start(prompt)
        _, state = model.step(prompt[:, 0], state)
        assert state.keys[0].shape == (2, kv, 7, 6)
        assert state.cache_numbers() == cache_numbers(model.config, 7, batch_size=2)
        sizes[kv] = state.cache_numbers()
    assert sizes == {4: 2 * 2 * 4 * 6 * 7 * 2, 2: 2 * 2 * 2 * 6 * 7 * 2, 1: 2 * 2 * 1 * 6 * 7 * 2}
    _, plain = model.start(prompt, cache=False)
    assert plain.cache_numbers() == 0


def test_rotary_keys_are_cached_rotated_and_scores_depend_on_the_offset_only():
    q, k = torch.randn(1, 1, 1, 8, dtype=torch.float64), torch.randn(1, 1, 1, 8, dtype=torch.float64)
    score = lambda m, n: (rotate_pairs(q, m) * rotate_pairs(k, n)).sum()  # noqa: E731
    torch.testing.assert_close(score(7, 3), score(104, 100), **F64)
    torch.testing.assert_close(rotate_pairs(q, 0), q, rtol=0, atol=0)  # exact: position 0 turns by cos 0 = 1, sin 0 = 0
    model = model_of(small(positions="rotary"))
    tokens = torch.randint(0, 37, (1, 5), generator=torch.Generator().manual_seed(7))
    _, state = model.start(tokens)
    layer = model.layers[0]
    x = layer.add_norm1.norm(model.embedding(tokens))
    _, k_raw, _ = layer.self_attention.in_proj(x).split([24, 24, 24], dim=-1)
    k_raw = k_raw.view(1, 5, 4, 6).transpose(1, 2)
    torch.testing.assert_close(state.keys[0], rotate_pairs(k_raw, 0), **F64)


def test_select_keeps_rows_of_the_cache():
    model = model_of(small())
    prompt = torch.randint(3, 37, (3, 4), generator=torch.Generator().manual_seed(8))
    _, state = model.start(prompt)
    picked = state.select(torch.tensor([2, 0]))
    assert picked.tokens.tolist() == prompt[[2, 0]].tolist()
    assert picked.keys[1].shape == (2, 4, 4, 6)


# --- Sampling filters against hand cases ---------------------------------------------------------


def test_top_k_keeps_the_k_largest():
    logits = torch.tensor([[1.0, 3.0, 2.0, 0.5], [0.0, -1.0, 5.0, 4.0]], dtype=torch.float64)
    kept = top_k_filter(logits, 2).isfinite()
    assert kept.tolist() == [[False, True, True, False], [False, False, True, True]]
    assert top_k_filter(logits, 10).isfinite().all()


def test_top_p_keeps_the_fewest_tokens_that_reach_p():
    probs = torch.tensor([[0.5, 0.2, 0.25, 0.05]], dtype=torch.float64)
    logits = probs.log()
    assert top_p_filter(logits, 0.5).isfinite().tolist() == [[True, False, False, False]]
    assert top_p_filter(logits, 0.6).isfinite().tolist() == [[True, False, True, False]]
    assert top_p_filter(logits, 0.75).isfinite().tolist() == [[True, False, True, False]]
    assert top_p_filter(logits, 0.76).isfinite().tolist() == [[True, True, True, False]]
    assert top_p_filter(logits, 0.01).isfinite().tolist() == [[True, False, False, False]]
    assert top_p_filter(logits, 1.0).isfinite().all()
    kept = top_p_filter(logits, 0.6)
    torch.testing.assert_close(kept[kept.isfinite()], logits[0, [0, 2]], rtol=0, atol=0)  # exact: copied


def test_greedy_is_temperature_zero_and_sampling_follows_the_filter():
    logits = torch.tensor([[0.0, 2.0, 1.0]], dtype=torch.float64).repeat(200, 1)
    assert sample_next(logits, 0.0).unique().tolist() == [1]
    drawn = sample_next(logits, 1.0, top_k=2, generator=torch.Generator().manual_seed(0))
    assert set(drawn.tolist()) == {1, 2}


def test_next_token_loss_shifts_by_one():
    model = model_of(small())
    tokens = torch.randint(1, 37, (2, 6), generator=torch.Generator().manual_seed(9))
    logits = model(tokens)
    by_hand = -logits[:, :-1].log_softmax(-1).gather(-1, tokens[:, 1:, None]).mean()
    torch.testing.assert_close(next_token_loss(logits, tokens), by_hand, **F64)


# --- Translation as language modelling --------------------------------------------------------


def test_the_prefix_mask_opens_the_prefix_block_and_stays_causal_after_it():
    mask = prefix_mask(torch.tensor([3, 1]), 5)
    assert mask.shape == (2, 5, 5)
    assert mask[0, 0, 2] and mask[0, 2, 0] and not mask[0, 2, 3] and not mask[0, 3, 4] and mask[0, 4, 3]
    assert torch.equal(mask[1], torch.ones(5, 5, dtype=torch.bool).tril())  # a prefix of one: causal


def test_a_prefix_lm_reads_its_prefix_both_ways_and_the_rest_causally():
    model = model_of(small())
    tokens = torch.randint(1, 37, (2, 7), generator=torch.Generator().manual_seed(3))
    lengths = torch.tensor([4, 2])
    logits = model(tokens, prefix_lengths=lengths)
    changed = tokens.clone()
    changed[:, 6] = (changed[:, 6] % 36) + 1  # the last token: no earlier position may notice
    torch.testing.assert_close(model(changed, prefix_lengths=lengths)[:, :6], logits[:, :6], **F64)
    in_prefix = tokens.clone()
    in_prefix[0, 3] = (in_prefix[0, 3] % 36) + 1  # inside row 0's prefix: its first positions see it
    assert not torch.allclose(model(in_prefix, prefix_lengths=lengths)[0, 0], logits[0, 0])
    causal = model(tokens)
    torch.testing.assert_close(model(tokens, prefix_lengths=torch.tensor([1, 1])), causal, **F64)


def test_cached_prefix_generation_equals_the_whole_sequence_read_as_a_prefix_lm():
    model = model_of(small())
    prompt = torch.randint(1, 37, (2, 5), generator=torch.Generator().manual_seed(4))
    lengths = torch.full((2,), 5)
    logits, state = model.start(prompt, prefix_lengths=lengths)
    nxt = logits.argmax(-1)
    step_logits, _ = model.step(nxt, state)
    whole = model(torch.cat([prompt, nxt[:, None]], dim=1), prefix_lengths=lengths)
    torch.testing.assert_close(logits, whole[:, 4], **F64)
    torch.testing.assert_close(step_logits, whole[:, 5], **F64)


def test_pairs_become_one_sequence_and_the_loss_counts_the_target_alone():
    tokens, lengths = pair_sequences([[5, 6], [7]], [[8, 9, 10], [11]], bos_id=1, eos_id=2, sep_id=3, pad_id=0)
    assert tokens.tolist() == [[1, 5, 6, 3, 8, 9, 10, 2], [1, 7, 3, 11, 2, 0, 0, 0]]
    assert lengths.tolist() == [4, 3]
    logits = torch.randn(2, 8, 12, generator=torch.Generator().manual_seed(5))
    log_p = logits[:, :-1].log_softmax(-1).gather(-1, tokens[:, 1:, None])[..., 0]
    counted = [(0, 3), (0, 4), (0, 5), (0, 6), (1, 2), (1, 3)]  # predictions of 8, 9, 10, <eos>; 11, <eos>
    by_hand = -torch.stack([log_p[b, t] for b, t in counted]).mean()
    torch.testing.assert_close(translation_loss(logits, tokens, sep_id=3, pad_id=0), by_hand, **F64)


def test_greedy_translation_groups_by_length_and_stops_at_eos_or_the_limit():
    model = model_of(small(max_len=24))
    sources = [[5, 6, 7], [8], [9, 10, 11]]
    ends = dict(bos_id=1, eos_id=2, sep_id=3)
    together = translate_greedy(model, sources, max_len=6, **ends)
    alone = [translate_greedy(model, [s], max_len=6, **ends)[0] for s in sources]
    assert together == alone and all(len(t) <= 6 and 2 not in t for t in together)
    with pytest.raises(ValueError, match="no position"):
        translate_greedy(model, [list(range(4, 26))], **ends)


# --- Errors --------------------------------------------------------------------------------------


def test_bad_settings_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="not divisible by num_heads"):
        small(num_heads=5)
    with pytest.raises(ValueError, match="not divisible by num_kv_heads"):
        small(num_kv_heads=3)
    with pytest.raises(ValueError, match="positions must be one of"):
        small(positions="sinusoidal")
    with pytest.raises(ValueError, match="top_p must be in"):
        top_p_filter(torch.zeros(1, 3), 0.0)
    with pytest.raises(ValueError, match="temperature"):
        sample_next(torch.zeros(1, 3), -1.0)


@pytest.mark.parametrize("positions", ["learned", "rotary"])
def test_lengths_beyond_max_len_are_refused(positions):
    model = model_of(small(max_len=8, positions=positions))
    with pytest.raises(ValueError, match="max_len=8"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="max_len=8"):
        generate(model, torch.ones(1, 4, dtype=torch.long), 6)
    assert generate(model, torch.ones(1, 4, dtype=torch.long), 5).shape == (1, 9)


def test_bad_tokens_and_states_are_refused():
    model = model_of(small())
    with pytest.raises(IndexError, match="outside the vocabulary"):
        model(torch.full((1, 3), 37))
    _, state = model.start(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="one token per sequence"):
        model.step(torch.ones(3, dtype=torch.long), state)
    with pytest.raises(TypeError, match="DecoderOnlyState"):
        model.step(torch.ones(2, dtype=torch.long), None)
