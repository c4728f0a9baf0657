"""Multi-head attention: equal to torch.nn.MultiheadAttention and d2l.MultiHeadAttention,
masks that hold, clear errors.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnbook.attention import MultiHeadAttention
from attnbook.masks import causal_mask, padding_mask

D, H = 24, 4


def _use_fused_kernel(layer: MultiHeadAttention, fused: bool) -> MultiHeadAttention:
    """Force the fast path onto PyTorch's fused kernel (or onto the explicit products), whatever the length."""
    layer.fused_kernel_min_keys = 0 if fused else 10**9
    return layer


def _ours_and_torch(bias: bool, seed: int = 0, d: int = D, h: int = H, fused: bool = True):
    """Our layer and PyTorch's, in float64, with the same (random, non-zero) parameters."""
    torch.manual_seed(seed)
    ours = _use_fused_kernel(MultiHeadAttention(d, h, bias=bias).double(), fused)
    ref = nn.MultiheadAttention(d, h, bias=bias, batch_first=True).double()
    with torch.no_grad():
        for p in ours.parameters():
            p.normal_(0, 0.4)
        ref.in_proj_weight.copy_(ours.in_proj.weight)
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        if bias:
            ref.in_proj_bias.copy_(ours.in_proj.bias)
            ref.out_proj.bias.copy_(ours.out_proj.bias)
    return ours, ref


def _d2l_copy(ours: MultiHeadAttention, bias: bool):
    """d2l's layer with our parameters: its W_q, W_k, W_v are our in_proj's three blocks."""
    from d2l import torch as d2l

    theirs = d2l.MultiHeadAttention(ours.d_model, ours.num_heads, 0.0, bias=bias)
    theirs(*(torch.zeros(1, 1, ours.d_model),) * 3, None)  # materialize the lazy layers
    theirs = theirs.double().eval()
    w_q, w_k, w_v = ours.in_proj.weight.chunk(3)
    with torch.no_grad():
        for layer, w in zip((theirs.W_q, theirs.W_k, theirs.W_v, theirs.W_o), (w_q, w_k, w_v, ours.out_proj.weight)):
            layer.weight.copy_(w)
        if bias:
            for layer, b in zip(
                (theirs.W_q, theirs.W_k, theirs.W_v, theirs.W_o), (*ours.in_proj.bias.chunk(3), ours.out_proj.bias)
            ):
                layer.bias.copy_(b)
    return theirs


def _x(*shape, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


CASES = ["plain", "padded", "causal", "padded+causal"]


def _masks(case: str, lengths: list[int], T: int):
    kpm = padding_mask(torch.tensor(lengths), T) if "padded" in case else None
    return kpm, "causal" in case


# --- equality with torch.nn.MultiheadAttention ---------------------------------------------


@pytest.mark.parametrize("fused", [True, False], ids=["fused-kernel", "explicit-products"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", CASES)
def test_self_attention_equals_torch(case, bias, fused):
    ours, ref = _ours_and_torch(bias, fused=fused)
    x = _x(3, 7, D)
    kpm, causal = _masks(case, [7, 4, 2], 7)
    attn_mask = causal_mask(7) if causal else None
    expected, expected_w = ref(x, x, x, key_padding_mask=kpm, attn_mask=attn_mask, average_attn_weights=False)
    got = ours(x, x, x, key_padding_mask=kpm, is_causal=causal)
    got_w_path, got_w = ours(x, x, x, key_padding_mask=kpm, is_causal=causal, need_weights=True)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(got_w_path, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(got_w, expected_w, rtol=0, atol=1e-12)
    assert got_w.shape == (3, H, 7, 7)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("same_memory", [True, False], ids=["key-is-value", "separate-key-value"])
def test_cross_attention_equals_torch(bias, same_memory):
    ours, ref = _ours_and_torch(bias, seed=3)  # fused kernel
    x, memory = _x(2, 5, D, seed=4), _x(2, 9, D, seed=5)
    value = memory if same_memory else _x(2, 9, D, seed=6)
    kpm = padding_mask(torch.tensor([9, 3]), 9)
    expected, expected_w = ref(x, memory, value, key_padding_mask=kpm, average_attn_weights=False)
    torch.testing.assert_close(ours(x, memory, value, key_padding_mask=kpm), expected, rtol=0, atol=1e-12)
    out, w = ours(x, memory, value, key_padding_mask=kpm, need_weights=True)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(w, expected_w, rtol=0, atol=1e-12)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fused", [True, False], ids=["fused-kernel", "explicit-products"])
def test_gradients_equal_torch(case, fused):
    ours, ref = _ours_and_torch(True, seed=7, fused=fused)
    kpm, causal = _masks(case, [6, 3], 6)
    x1 = _x(2, 6, D, seed=8).requires_grad_()
    x2 = x1.detach().clone().requires_grad_()
    grad = _x(2, 6, D, seed=9)
    ours(x1, x1, x1, key_padding_mask=kpm, is_causal=causal).backward(grad)
    attn_mask = causal_mask(6) if causal else None
    ref(x2, x2, x2, key_padding_mask=kpm, attn_mask=attn_mask, need_weights=False)[0].backward(grad)
    torch.testing.assert_close(x1.grad, x2.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(ours.in_proj.weight.grad, ref.in_proj_weight.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(ours.out_proj.bias.grad, ref.out_proj.bias.grad, rtol=0, atol=1e-12)


# --- equality with d2l.MultiHeadAttention ---------------------------------------------------


def _d2l_valid_lens(case: str, lengths: list[int], T: int):
    """d2l masks by valid lengths: (B,) for padding, (B, T) per query for causal masks."""
    lengths = torch.tensor(lengths)
    if case == "plain":
        return None
    if case == "padded":
        return lengths
    per_query = torch.arange(1, T + 1).repeat(len(lengths), 1)  # query i sees keys 0..i
    return torch.minimum(per_query, lengths[:, None]) if case == "padded+causal" else per_query


@pytest.mark.parametrize("fused", [True, False], ids=["fused-kernel", "explicit-products"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", CASES)
def test_self_attention_equals_d2l(case, bias, fused):
    ours, _ = _ours_and_torch(bias, seed=11, fused=fused)
    theirs = _d2l_copy(ours, bias)
    x = _x(3, 8, D, seed=12)
    kpm, causal = _masks(case, [8, 5, 1], 8)
    expected = theirs(x, x, x, _d2l_valid_lens(case, [8, 5, 1], 8))
    torch.testing.assert_close(ours(x, x, x, key_padding_mask=kpm, is_causal=causal), expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(
        ours(x, x, x, key_padding_mask=kpm, is_causal=causal, need_weights=True)[0], expected, rtol=0, atol=1e-12
    )


@pytest.mark.parametrize("bias", [True, False])
def test_cross_attention_equals_d2l(bias):
    ours, _ = _ours_and_torch(bias, seed=13)
    theirs = _d2l_copy(ours, bias)
    x, memory = _x(2, 4, D, seed=14), _x(2, 10, D, seed=15)
    expected = theirs(x, memory, memory, torch.tensor([10, 6]))
    got = ours(x, memory, memory, key_padding_mask=padding_mask(torch.tensor([10, 6]), 10))
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


# --- the fast path and the weight-returning path agree ----------------------------------------


@pytest.mark.parametrize("case", CASES + ["a sequence that is all padding"])
def test_fast_path_equals_weight_path_with_gradients(case):
    torch.manual_seed(0)
    layer = _use_fused_kernel(MultiHeadAttention(32, 8), True)
    lengths = [0, 5, 9] if "all padding" in case else [9, 5, 2]
    kpm, causal = _masks(case if "all padding" not in case else "padded", lengths, 9)
    x = torch.randn(3, 9, 32)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    fast = layer(x1, x1, x1, key_padding_mask=kpm, is_causal=causal)
    slow, weights = layer(x2, x2, x2, key_padding_mask=kpm, is_causal=causal, need_weights=True)
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-6)
    grad = torch.randn_like(fast)
    fast.backward(grad)
    slow.backward(grad)
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-5, atol=1e-6)
    assert not torch.isnan(fast).any() and not torch.isnan(x1.grad).any()
    if kpm is not None:
        assert torch.all(weights.masked_select(kpm[:, None, None, :].expand_as(weights)) == 0)
    if "all padding" in case:  # no key to look at: zero weights, the output is out_proj's bias
        assert torch.all(weights[0] == 0)
        torch.testing.assert_close(fast[0], layer.out_proj.bias.expand(9, 32))


def test_weights_are_distributions_over_visible_keys():
    torch.manual_seed(0)
    layer = MultiHeadAttention(16, 2)
    x = torch.randn(2, 5, 16)
    _, w = layer(x, x, x, key_padding_mask=padding_mask(torch.tensor([5, 3]), 5), is_causal=True, need_weights=True)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 5))
    assert torch.all(w.triu(diagonal=1) == 0) and torch.all(w[1, :, :, 3:] == 0)


# --- what masks promise -------------------------------------------------------------------------


@pytest.mark.parametrize("need_weights", [False, True])
def test_padding_content_never_changes_real_positions(need_weights):
    torch.manual_seed(0)
    layer = _use_fused_kernel(MultiHeadAttention(32, 4).double(), True)
    lengths = torch.tensor([7, 4, 1])
    kpm = padding_mask(lengths, 7)
    x = torch.randn(3, 7, 32, dtype=torch.float64)
    noisy = torch.where(kpm[..., None], 1e3 * torch.randn_like(x), x)  # wild values in the padding only
    memory = torch.randn(3, 7, 32, dtype=torch.float64)
    noisy_memory = torch.where(kpm[..., None], torch.randn_like(memory), memory)
    for causal in (False, True):
        a = layer(x, x, x, key_padding_mask=kpm, is_causal=causal, need_weights=need_weights)
        b = layer(noisy, noisy, noisy, key_padding_mask=kpm, is_causal=causal, need_weights=need_weights)
        a, b = (a[0], b[0]) if need_weights else (a, b)
        real = ~kpm
        torch.testing.assert_close(a[real], b[real], rtol=0, atol=1e-10)
    q = torch.randn(3, 2, 32, dtype=torch.float64)
    torch.testing.assert_close(
        layer(q, memory, memory, key_padding_mask=kpm),
        layer(q, noisy_memory, noisy_memory, key_padding_mask=kpm),
        rtol=0,
        atol=1e-10,
    )


@pytest.mark.parametrize("need_weights", [False, True])
def test_causal_output_never_depends_on_a_later_token(need_weights):
    torch.manual_seed(0)
    layer = _use_fused_kernel(MultiHeadAttention(16, 4).double(), True)
    x = torch.randn(2, 6, 16, dtype=torch.float64)

    def f(inp):
        out = layer(inp, inp, inp, is_causal=True, need_weights=need_weights)
        return out[0] if need_weights else out

    jac = torch.autograd.functional.jacobian(f, x)  # (2, 6, 16, 2, 6, 16)
    influence = jac.abs().sum(dim=(2, 5))  # (B, T_out, B, T_in)
    for b in range(2):
        block = influence[b, :, b, :]
        assert torch.all(block.triu(diagonal=1) == 0), "an output depends on a later token"
        seen = torch.ones(6, 6, dtype=torch.bool).tril()
        assert torch.all(block[seen] > 0), "an output ignores an earlier token"
    # and the other way round: changing the last token leaves every earlier output unchanged
    changed = x.clone()
    changed[:, -1] += 5.0
    torch.testing.assert_close(f(changed)[:, :-1], f(x)[:, :-1], rtol=1e-13, atol=1e-13)


def test_permutation_equivariance_without_a_mask():
    torch.manual_seed(0)
    layer = _use_fused_kernel(MultiHeadAttention(32, 4).double(), True)
    x = torch.randn(2, 9, 32, dtype=torch.float64)
    perm = torch.randperm(9)
    torch.testing.assert_close(layer(x[:, perm], x[:, perm], x[:, perm]), layer(x, x, x)[:, perm], rtol=0, atol=1e-12)
    kpm = padding_mask(torch.tensor([9, 5]), 9)
    torch.testing.assert_close(
        layer(x[:, perm], x[:, perm], x[:, perm], key_padding_mask=kpm[:, perm]),
        layer(x, x, x, key_padding_mask=kpm)[:, perm],
        rtol=0,
        atol=1e-12,
    )


# --- structure: one fused projection, heads by reshape, dropout -----------------------------------


def test_self_attention_uses_one_product_and_cross_attention_separate_ones(monkeypatch):
    import attnbook.attention as attention

    layer = MultiHeadAttention(16, 2)
    x, memory = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    widths = []
    real_linear = attention.F.linear

    def spy(inp, weight, bias=None):
        widths.append(weight.shape[0])
        return real_linear(inp, weight, bias)

    monkeypatch.setattr(attention.F, "linear", spy)
    layer(x, x, x)
    assert widths == [48, 16], widths  # Q, K, V in one product of width 3d, then the output projection
    widths.clear()
    layer(x, memory, memory)
    assert widths == [16, 32, 16], widths  # Q alone, K and V together from the one memory, output
    widths.clear()
    layer(x, memory, memory.clone())
    assert widths == [16, 16, 16, 16], widths


def test_fast_path_calls_the_fused_kernel_from_the_stated_length_on(monkeypatch):
    import attnbook.attention as attention

    calls = []
    real = attention.F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(args[1].shape[-2])  # the number of keys
        return real(*args, **kwargs)

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", spy)
    layer = MultiHeadAttention(16, 2)
    n = layer.fused_kernel_min_keys
    for length in (n - 1, n, n + 5):
        x = torch.randn(1, length, 16)
        layer(x, x, x)
        layer(x, x, x, need_weights=True)  # the weights always come from the explicit products
    assert calls == [n, n + 5]


def test_parameters_do_not_depend_on_the_number_of_heads():
    for h in (1, 2, 8):
        assert sum(p.numel() for p in MultiHeadAttention(64, h).parameters()) == 4 * 64 * 64 + 4 * 64
    assert sum(p.numel() for p in MultiHeadAttention(64, 8, bias=False).parameters()) == 4 * 64 * 64


def test_dropout_only_in_training_and_weights_before_dropout():
    torch.manual_seed(0)
    layer = MultiHeadAttention(16, 2, dropout=0.5)
    x = torch.randn(2, 6, 16)
    layer.eval()
    torch.testing.assert_close(layer(x, x, x), layer(x, x, x))
    layer.train()
    assert not torch.allclose(layer(x, x, x), layer(x, x, x))
    _, w = layer(x, x, x, need_weights=True)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 6))


# --- bad input gets a clear error -------------------------------------------------------------------


def test_constructor_errors():
    with pytest.raises(ValueError, match=r"d_model \(30\) must be divisible by num_heads \(4\)"):
        MultiHeadAttention(30, 4)
    with pytest.raises(ValueError, match="num_heads must be >= 1"):
        MultiHeadAttention(30, 0)
    with pytest.raises(ValueError, match=r"dropout must be a probability"):
        MultiHeadAttention(32, 4, dropout=1.0)


def test_input_errors_name_the_problem():
    layer = MultiHeadAttention(16, 2)
    x = torch.randn(2, 5, 16)
    with pytest.raises(ValueError, match=r"key has width 8, but this layer has d_model=16"):
        layer(x, torch.randn(2, 5, 8), torch.randn(2, 5, 8))
    with pytest.raises(ValueError, match=r"same batch size B; got 2, 3 and 3"):
        layer(x, torch.randn(3, 5, 16), torch.randn(3, 5, 16))
    with pytest.raises(ValueError, match=r"same length S; got 5 keys and 4 values"):
        layer(x, torch.randn(2, 5, 16), torch.randn(2, 4, 16))
    with pytest.raises(ValueError, match=r"query must have shape \(B, length, d_model\), got shape \(5, 16\)"):
        layer(x[0], x, x)
    with pytest.raises(TypeError, match="value must be a torch.Tensor"):
        layer(x, x, [[1.0]])


def test_mask_errors_name_the_problem():
    layer = MultiHeadAttention(16, 2)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    with pytest.raises(TypeError, match="key_padding_mask must be a bool tensor"):
        layer(x, x, x, key_padding_mask=torch.zeros(2, 5))
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(B, S\) = \(2, 5\), got \(1, 5\)"):
        layer(x, x, x, key_padding_mask=torch.zeros(1, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"shape \(2, 5\) does not broadcast"):
        layer(x, memory, memory, key_padding_mask=torch.zeros(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="is_causal=True needs as many queries as keys"):
        layer(x, memory, memory, is_causal=True)


# --- projections and attention apart: what a decoder's key-value cache needs (chapter 7) ----------------


@pytest.mark.parametrize("fused", [True, False], ids=["fused-kernel", "explicit-products"])
@pytest.mark.parametrize("case", CASES)
def test_project_then_attend_equals_forward(case, fused):
    ours, _ = _ours_and_torch(True, seed=21, fused=fused)
    x, memory = _x(3, 7, D, seed=22), _x(3, 9, D, seed=23)
    kpm, causal = _masks(case, [7, 4, 2], 7)
    q, k, v = ours.project_self(x)
    assert q.shape == k.shape == v.shape == (3, H, 7, D // H)
    torch.testing.assert_close(
        ours.attend(q, k, v, kpm, causal), ours(x, x, x, key_padding_mask=kpm, is_causal=causal), rtol=0, atol=1e-12
    )
    out, w = ours.attend(q, k, v, kpm, causal, need_weights=True)
    expected, expected_w = ours(x, x, x, key_padding_mask=kpm, is_causal=causal, need_weights=True)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(w, expected_w, rtol=0, atol=1e-12)
    # cross-attention: the queries projected alone, the keys and values of the memory in one product
    mkpm = padding_mask(torch.tensor([9, 3, 6]), 9)
    mk, mv = ours.project_key_value(memory)
    torch.testing.assert_close(
        ours.attend(ours.project_query(x), mk, mv, mkpm),
        ours(x, memory, memory, key_padding_mask=mkpm),
        rtol=0,
        atol=1e-12,
    )


@pytest.mark.parametrize("fused", [True, False], ids=["fused-kernel", "explicit-products"])
@pytest.mark.parametrize("new", [1, 3])
def test_causal_attend_with_fewer_queries_is_the_last_rows(new, fused):
    """Queries for the last positions only, keys for all: the last rows of full causal attention."""
    ours, _ = _ours_and_torch(True, seed=24, fused=fused)
    x = _x(2, 8, D, seed=25)
    full = ours(x, x, x, is_causal=True)
    q, k, v = ours.project_self(x)
    torch.testing.assert_close(ours.attend(q[:, :, -new:], k, v, is_causal=True), full[:, -new:], rtol=0, atol=1e-12)
    kpm = padding_mask(torch.tensor([8, 8]), 8)
    out, w = ours.attend(q[:, :, -new:], k, v, kpm, is_causal=True, need_weights=True)
    torch.testing.assert_close(out, full[:, -new:], rtol=0, atol=1e-12)
    assert torch.all(w.triu(diagonal=8 - new + 1) == 0)


def test_attend_rejects_bad_heads():
    layer = MultiHeadAttention(D, H)
    q, k, v = layer.project_self(torch.randn(2, 5, D))
    with pytest.raises(ValueError, match="heads of shape"):
        layer.attend(q[0], k, v)
    with pytest.raises(ValueError, match=f"{H} heads of width"):
        layer.attend(q[:, :2], k, v)
    with pytest.raises(ValueError, match="T <= S"):
        layer.attend(q, k[:, :, :3], v[:, :, :3], is_causal=True)
    with pytest.raises(ValueError, match="disagree"):
        layer.attend(q, k, v[:, :, :3])
    with pytest.raises(ValueError, match="width 7"):
        layer.project_key_value(torch.randn(2, 5, 7))
