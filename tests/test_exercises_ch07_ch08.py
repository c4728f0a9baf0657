"""The reference solutions of chapters 7 and 8 agree with the library and with PyTorch."""

from __future__ import annotations

import math

import pytest
import torch

from attnbook.attention import MultiHeadAttention
from attnbook.exercises import ch07_transformer as ch07
from attnbook.exercises import ch08_training_a_translator as ch08
from attnbook.masks import padding_mask
from attnbook.train import NoamSchedule
from attnbook.transformer import DecoderLayer, EncoderLayer


def test_importing_the_checkers_leaves_the_global_random_stream_alone():
    import importlib

    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    importlib.reload(ch07)
    importlib.reload(ch08)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_and_pre_ln_decoder_layers_are_the_librarys(norm_first):
    torch.manual_seed(3)
    d, h, d_ff = 8, 2, 16
    x, memory, lengths = (
        torch.randn(2, 5, d, dtype=torch.float64),
        torch.randn(2, 6, d, dtype=torch.float64),
        torch.tensor([6, 3]),
    )
    with torch.no_grad():
        if not norm_first:
            layer = EncoderLayer(d, h, d_ff).double().eval()
            src_lengths = torch.tensor([5, 2])
            ours = ch07.check_encoder_layer.reference(
                x, src_lengths, layer.self_attention, layer.ffn, layer.add_norm1.norm, layer.add_norm2.norm
            )
            assert torch.allclose(ours, layer(x, padding_mask(src_lengths, 5)), atol=1e-12)
        else:
            layer = DecoderLayer(d, h, d_ff, norm_first=True).double().eval()
            norms = (layer.add_norm1.norm, layer.add_norm2.norm, layer.add_norm3.norm)
            ours = ch07.check_pre_ln_decoder_layer.reference(
                x, memory, lengths, layer.self_attention, layer.cross_attention, layer.ffn, norms
            )
            assert torch.allclose(ours, layer(x, memory, padding_mask(lengths, 6)), atol=1e-12)


def test_noam_lambda_through_lambdalr_is_noam_schedule():
    rates = {}
    for name in ("lambda", "noam"):
        weight = torch.nn.Parameter(torch.zeros(2))
        opt = torch.optim.Adam([weight], lr=2e-3)
        if name == "lambda":
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: ch08.check_noam_lambda.reference(s, 64, 50, 2e-3))
        else:
            sched = NoamSchedule(opt, d_model=64, warmup=50)
        rates[name] = []
        for _ in range(200):
            rates[name].append(opt.param_groups[0]["lr"])
            weight.grad = torch.ones(2)
            opt.step()
            sched.step()
    assert rates["lambda"] == pytest.approx(rates["noam"], rel=1e-12)


def test_prior_smoothing_with_equal_counts_is_uniform_smoothing_without_pad():
    torch.manual_seed(4)
    V, eps = 7, 0.2
    logits, targets = torch.randn(2, 3, V, dtype=torch.float64), torch.tensor([[4, 2, 0], [5, 0, 0]])
    loss = ch08.check_prior_smoothed_loss.reference(logits, targets, eps, torch.full((V,), 3.0), 0)
    q = torch.full((V,), eps / (V - 1), dtype=torch.float64)
    q[0] = 0
    q[4] += 1 - eps
    assert math.isclose(q.sum().item(), 1.0)
    log_p = torch.log_softmax(logits, -1)
    by_hand = [-(q * log_p[0, 0]).sum()]
    for b, t, y in [(0, 1, 2), (1, 0, 5)]:
        qq = torch.full((V,), eps / (V - 1), dtype=torch.float64)
        qq[0] = 0
        qq[y] += 1 - eps
        by_hand.append(-(qq * log_p[b, t]).sum())
    assert torch.isclose(loss, torch.stack(by_hand).mean())


def test_beam_step_keeps_a_frozen_hypothesis_unchanged():
    log_p = torch.tensor([[-1.0, -3.0]], dtype=torch.float64)
    lengths, finished = torch.tensor([[4, 6]]), torch.tensor([[True, False]])
    next_log_probs = torch.log_softmax(torch.randn(1, 2, 5, dtype=torch.float64), -1)
    new_lp, new_len, new_fin, origin, token = ch08.check_beam_step.reference(
        log_p, lengths, finished, next_log_probs, 0.6
    )
    frozen = origin[0] == 0
    assert frozen.sum() == 1  # a frozen hypothesis has exactly one candidate
    assert new_lp[0][frozen].item() == -1.0 and new_len[0][frozen].item() == 4 and bool(new_fin[0][frozen])
    assert token[0][frozen].item() == 2


def test_cross_attention_steps_with_the_cache_are_multihead_attention():
    torch.manual_seed(5)
    mha = MultiHeadAttention(8, 4).double().eval()
    w_q, w_k, w_v = (w.T for w in mha.in_proj.weight.detach().chunk(3))
    b_q, b_k, b_v = mha.in_proj.bias.detach().chunk(3)
    memory, y = torch.randn(3, 5, 8, dtype=torch.float64), torch.randn(3, 4, 8, dtype=torch.float64)
    mask = padding_mask(torch.tensor([5, 2, 4]), 5)
    with torch.no_grad():
        heads = ch08.check_cross_attention_steps.reference(y, memory, mask, w_q, b_q, w_k, b_k, w_v, b_v, 4)
        assert torch.allclose(mha.out_proj(heads), mha(y, memory, memory, key_padding_mask=mask), atol=1e-12)
