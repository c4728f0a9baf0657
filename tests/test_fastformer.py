"""Fastformer: equal to its equations computed one position at a time, the authors' size, masks, clear errors."""

from __future__ import annotations

import math

import pytest
import torch

from attnbook.fastformer import (
    AttentionPooling,
    FastformerEncoder,
    FastformerLayer,
    FastSelfAttention,
    LinearSelfAttention,
    LinformerSelfAttention,
    SoftmaxEncoder,
    SoftmaxEncoderLayer,
    prefix_softmax_pool,
)
from attnbook.masks import padding_mask

D, H = 12, 3


def _x(*shape, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _attention(seed=0, d=D, h=H, **options) -> FastSelfAttention:
    """A float64 layer with random, non-zero weights and biases (the default init has zero biases)."""
    torch.manual_seed(seed)
    layer = FastSelfAttention(d, h, **options).double()
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.5)
    return layer


# --- The reference: the equations, one position and one head at a time -------------------------


def _softmax_pool(scores: list[torch.Tensor], vectors: list[torch.Tensor]) -> torch.Tensor:
    """sum_j softmax(scores)_j vectors_j, written out; zero when there is nothing to pool."""
    if not scores:
        return torch.zeros((), dtype=torch.float64)
    top = max(s.item() for s in scores)  # a constant: subtracting it changes neither the weights nor their gradients
    weights = [torch.exp(s - top) for s in scores]
    total = sum(weights)
    out = 0
    for w, v in zip(weights, vectors):
        out = out + (w / total) * v
    return out


def loop_fastformer(layer: FastSelfAttention, x: torch.Tensor, ignore: torch.Tensor | None = None, is_causal=False):
    """Fastformer written from the paper's equations, with Python loops over sequences, positions and heads.

    Per head h (slice of width d_h): alpha_j ~ exp(w_q,h . q_j / sqrt(d_h)); global query = sum_j alpha_j q_j[h];
    p_j = k_j * global query; beta_j ~ exp(w_k,h . p_j / sqrt(d_h)); global key = sum_j beta_j p_j[h];
    out_i = transform(global key * q_i) + q_i. Causal: position i pools j <= i, and p_j uses the global query at j.
    """
    B, N, d = x.shape
    Hh, dh = layer.num_heads, layer.head_dim
    W_q, b_q = layer.query.weight, layer.query.bias
    W_k, b_k = layer.key.weight, layer.key.bias
    w_qa, c_qa = layer.query_att.weight, layer.query_att.bias
    w_ka, c_ka = layer.key_att.weight, layer.key_att.bias
    W_t, b_t = layer.transform.weight, layer.transform.bias
    out = torch.zeros(B, N, d, dtype=torch.float64)
    for b in range(B):
        real = [j for j in range(N) if ignore is None or not bool(ignore[b, j])]
        q = [W_q @ x[b, j] + b_q for j in range(N)]
        k = [W_k @ x[b, j] + b_k for j in range(N)]

        def global_query(upto):
            seen = [j for j in real if j <= upto]
            parts = []
            for h in range(Hh):
                scores = [(w_qa[h] @ q[j] + c_qa[h]) / math.sqrt(dh) for j in seen]
                pooled = _softmax_pool(scores, [q[j][h * dh : (h + 1) * dh] for j in seen])
                parts.append(pooled * torch.ones(dh, dtype=torch.float64))
            return torch.cat(parts)

        last = N - 1
        g_all = global_query(last)
        p = [k[j] * (global_query(j) if is_causal else g_all) for j in range(N)]
        for i in range(N):
            seen = [j for j in real if not is_causal or j <= i]
            parts = []
            for h in range(Hh):
                scores = [(w_ka[h] @ p[j] + c_ka[h]) / math.sqrt(dh) for j in seen]
                pooled = _softmax_pool(scores, [p[j][h * dh : (h + 1) * dh] for j in seen])
                parts.append(pooled * torch.ones(dh, dtype=torch.float64))
            k_global = torch.cat(parts)
            out[b, i] = W_t @ (k_global * q[i]) + b_t + q[i]
    return out


# --- Equality with the loop ----------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("padded", [False, True], ids=["no-padding", "padding"])
def test_equals_the_equations_computed_one_position_at_a_time(padded, causal):
    layer = _attention()
    x = _x(3, 7, D)
    ignore = padding_mask(torch.tensor([7, 4, 1]), 7) if padded else None
    got = layer(x, ignore, is_causal=causal)
    torch.testing.assert_close(got, loop_fastformer(layer, x, ignore, causal), rtol=0, atol=1e-12)


def test_equals_the_loop_with_one_head_and_with_one_feature_per_head():
    x = _x(2, 5, 6, seed=3)
    for h in (1, 6):
        layer = _attention(d=6, h=h)
        torch.testing.assert_close(layer(x), loop_fastformer(layer, x), rtol=0, atol=1e-12)


def test_weights_are_the_two_softmaxes_and_ignore_padding():
    layer = _attention()
    x = _x(2, 6, D)
    ignore = padding_mask(torch.tensor([6, 3]), 6)
    out, alpha, beta = layer(x, ignore, need_weights=True)
    assert alpha.shape == beta.shape == (2, H, 6)
    torch.testing.assert_close(out, layer(x, ignore))
    torch.testing.assert_close(alpha.sum(-1), torch.ones(2, H, dtype=torch.float64))
    torch.testing.assert_close(beta.sum(-1), torch.ones(2, H, dtype=torch.float64))
    assert (alpha[1, :, 3:] == 0).all() and (beta[1, :, 3:] == 0).all()
    q = layer.query(x)
    expected_alpha = torch.softmax(layer.query_att(q[0]).T / math.sqrt(D // H), dim=-1)
    torch.testing.assert_close(alpha[0], expected_alpha)


def test_need_weights_without_it_returns_only_the_output():
    layer = _attention()
    assert isinstance(layer(_x(1, 3, D)), torch.Tensor)


def test_no_nan_from_huge_scores():
    """The softmaxes subtract their maximum, the causal prefix sums work in log space: no overflow."""
    layer = _attention()
    with torch.no_grad():
        layer.query_att.weight.mul_(400.0)
        layer.key_att.weight.mul_(400.0)
    x = _x(2, 9, D)
    ignore = padding_mask(torch.tensor([9, 5]), 9)
    for causal in (False, True):
        got = layer(x, ignore, is_causal=causal)
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, loop_fastformer(layer, x, ignore, causal), rtol=1e-10, atol=1e-9)
    got32 = layer.float()(x.float(), ignore, is_causal=True)
    assert torch.isfinite(got32).all()


# --- The authors' module: names and size ---------------------------------------------------------


def test_parameter_count_of_the_authors_configuration():
    layer = FastSelfAttention(256, 16)
    assert sum(p.numel() for p in layer.parameters()) == 205_600
    # query, key, transform: 256 x 256 + 256 each; query_att, key_att: 256 x 16 + 16 each
    assert 3 * (256 * 256 + 256) + 2 * (256 * 16 + 16) == 205_600


def test_submodule_names_and_shapes_are_the_authors():
    shapes = {name: tuple(p.shape) for name, p in FastSelfAttention(256, 16).state_dict().items()}
    assert shapes == {
        "query.weight": (256, 256), "query.bias": (256,),
        "query_att.weight": (16, 256), "query_att.bias": (16,),
        "key.weight": (256, 256), "key.bias": (256,),
        "key_att.weight": (16, 256), "key_att.bias": (16,),
        "transform.weight": (256, 256), "transform.bias": (256,),
    }  # fmt: skip


def test_authors_initialization_normal_002_and_zero_biases():
    torch.manual_seed(0)
    layer = FastSelfAttention(256, 16)
    weights = torch.cat([m.weight.flatten() for m in layer.children()])
    assert abs(weights.std().item() - 0.02) < 0.001 and abs(weights.mean().item()) < 0.001
    assert all((m.bias == 0).all() for m in layer.children())
    default = FastSelfAttention(256, 16, init_std=None)
    assert default.query.weight.abs().max() <= 1 / math.sqrt(256)  # PyTorch's uniform(-1/sqrt(d), 1/sqrt(d))


def test_a_state_dict_with_the_authors_key_names_loads():
    source = _attention()
    target = FastSelfAttention(D, H).double()
    target.load_state_dict({k: v.clone() for k, v in source.state_dict().items()}, strict=True)
    x = _x(1, 4, D)
    torch.testing.assert_close(target(x), source(x))


# --- Masks ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_padded_content_never_changes_real_outputs(causal):
    layer = _attention()
    x = _x(3, 8, D)
    lengths = torch.tensor([8, 5, 2])
    ignore = padding_mask(lengths, 8)
    noisy = x.clone()
    noisy[ignore] = _x(int(ignore.sum()), D, seed=9) * 100
    a, b = layer(x, ignore, is_causal=causal), layer(noisy, ignore, is_causal=causal)
    real = ~ignore
    torch.testing.assert_close(a[real], b[real], rtol=0, atol=1e-12)
    # and a padded sequence gives what the sequence alone gives
    for row, n in enumerate(lengths.tolist()):
        alone = layer(x[row : row + 1, :n], is_causal=causal)
        torch.testing.assert_close(a[row : row + 1, :n], alone, rtol=0, atol=1e-12)


def test_padding_anywhere_not_only_at_the_end():
    layer = _attention()
    x = _x(2, 6, D)
    ignore = torch.tensor([[True, False, True, False, False, True], [False, True, True, True, False, False]])
    for causal in (False, True):
        torch.testing.assert_close(
            layer(x, ignore, is_causal=causal), loop_fastformer(layer, x, ignore, causal), rtol=0, atol=1e-12
        )


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_all_padded_rows_give_no_nan_in_outputs_or_gradients(causal):
    layer = _attention()
    x = _x(2, 5, D).requires_grad_()
    ignore = torch.tensor([[True] * 5, [False, False, True, True, True]])
    out = layer(x, ignore, is_causal=causal)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in layer.parameters())
    # nothing to pool: both global vectors are zero, so each position gets transform(0) + q_i
    q = layer.query(x[0])
    torch.testing.assert_close(out[0], layer.transform.bias + q)
    if not causal:
        _, alpha, beta = layer(x, ignore, need_weights=True)
        assert (alpha[0] == 0).all() and (beta[0] == 0).all()


def test_gradients_equal_the_loop():
    layer = _attention()
    x = _x(2, 5, D)
    ignore = padding_mask(torch.tensor([5, 3]), 5)
    for causal in (False, True):
        a = x.clone().requires_grad_()
        b = x.clone().requires_grad_()
        layer(a, ignore, is_causal=causal).pow(2).sum().backward()
        grads = [p.grad.clone() for p in layer.parameters()]
        layer.zero_grad()
        loop_fastformer(layer, b, ignore, causal).pow(2).sum().backward()
        # gradients reach 10^4 here: a relative bound, as an absolute one of 1e-10 is a few last bits
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-12, atol=1e-10)
        for g, p in zip(grads, layer.parameters()):
            torch.testing.assert_close(g, p.grad, rtol=1e-12, atol=1e-10)
        layer.zero_grad()


# --- The causal variant ----------------------------------------------------------------------------


def test_causal_never_looks_ahead_by_gradient():
    layer = _attention()
    N = 9
    x = _x(1, N, D).requires_grad_()
    out = layer(x, is_causal=True)
    for i in range(N):
        (grad,) = torch.autograd.grad(out[0, i].sum(), x, retain_graph=True)
        assert (grad[0, i + 1 :] == 0).all(), f"position {i} depends on a later position"
        assert (grad[0, : i + 1].abs().sum(-1) > 0).all(), f"position {i} ignores an earlier position"


def test_causal_never_looks_ahead_by_perturbation():
    layer = _attention()
    x = _x(2, 10, D)
    out = layer(x, is_causal=True)
    for t in (0, 4, 9):
        changed = x.clone()
        changed[:, t:] = _x(2, 10 - t, D, seed=t + 20) * 50
        torch.testing.assert_close(layer(changed, is_causal=True)[:, :t], out[:, :t], rtol=1e-13, atol=1e-13)


def test_causal_last_position_equals_the_bidirectional_global_query():
    """At the last position the causal global query has seen everything: it is the bidirectional one."""
    layer = _attention()
    x = _x(2, 6, D)
    q = layer.query(x)
    scores = layer.query_att(q) / math.sqrt(layer.head_dim)
    running = layer._causal_pool(scores, q, None)
    _, full = layer._pool(scores, q, None)
    torch.testing.assert_close(running[:, -1], full[:, 0], rtol=0, atol=1e-12)


def _explicit_causal_pool(scores, values, ignore):
    """The N x N causal softmax, with -inf above the diagonal and on padding (the quadratic reference)."""
    B, N, Hh, _ = values.shape
    causal = torch.ones(N, N, dtype=torch.bool).triu(1)
    hidden = causal[None, None] | ignore[:, None, None, :]  # (B, 1, N, N)
    s = scores.transpose(1, 2)[:, :, None, :].expand(B, Hh, N, N)  # (B, H, i, j)
    weights = torch.softmax(s.masked_fill(hidden, -math.inf), dim=-1).nan_to_num(0.0)
    return (weights @ values.transpose(1, 2)).transpose(1, 2)  # (B, N, H, dh)


def _pool_inputs(N, seed=4, scale=30.0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    B, Hh, dh = 2, 3, 4
    scores = torch.randn(B, N, Hh, generator=g, dtype=dtype) * scale
    values = torch.randn(B, N, Hh, dh, generator=g, dtype=dtype)
    values[0, min(3, N - 1), 1, 2] = 0.0  # an exact zero value
    ignore = padding_mask(torch.tensor([N, max(1, N // 2)]), N)
    ignore[1, 0] = True  # the first position padded: position 0 of row 1 sees nothing
    return scores, values, ignore


def test_prefix_softmax_pool_equals_an_explicit_causal_softmax():
    scores, values, ignore = _pool_inputs(11)
    got = prefix_softmax_pool(scores, values, ignore)
    torch.testing.assert_close(got, _explicit_causal_pool(scores, values, ignore), rtol=0, atol=1e-12)
    assert (got[1, 0] == 0).all()


@pytest.mark.parametrize("N", [1, 2, 7, 16, 17, 50, 129])
@pytest.mark.parametrize("chunk", [2, 3, 4, 16])
def test_prefix_softmax_pool_in_chunks_equals_the_explicit_softmax(N, chunk):
    """Every way of cutting the sequence gives the same pools: a grid, chunks, chunks of chunks, a padded last one."""
    scores, values, ignore = _pool_inputs(N, seed=N)
    got = prefix_softmax_pool(scores, values, ignore, chunk=chunk)
    torch.testing.assert_close(got, _explicit_causal_pool(scores, values, ignore), rtol=0, atol=1e-12)
    no_padding = torch.zeros_like(ignore)
    torch.testing.assert_close(
        prefix_softmax_pool(scores, values, chunk=chunk),
        _explicit_causal_pool(scores, values, no_padding),
        rtol=0,
        atol=1e-12,
    )


@pytest.mark.parametrize("dtype, scale", [(torch.float64, 1e4), (torch.float32, 1e3)], ids=["float64", "float32"])
def test_prefix_softmax_pool_never_overflows(dtype, scale):
    """Scores far beyond where exp overflows (709 in float64, 88 in float32), rising and falling: finite, and right."""
    scores, values, ignore = _pool_inputs(40, seed=5, scale=scale, dtype=dtype)
    scores[:, :20] = scores[:, :20].abs()  # a run of large positive scores ...
    scores[:, 20:] = -scores[:, 20:].abs()  # ... then large negative ones
    scores.requires_grad_()
    values.requires_grad_()
    got = prefix_softmax_pool(scores, values, ignore, chunk=4)
    assert torch.isfinite(got).all()
    tolerance = {torch.float64: 1e-12, torch.float32: 1e-5}[dtype]
    torch.testing.assert_close(got, _explicit_causal_pool(scores, values, ignore), rtol=0, atol=tolerance)
    got.sum().backward()
    assert torch.isfinite(scores.grad).all() and torch.isfinite(values.grad).all()


def test_prefix_softmax_pool_gradients_by_finite_differences():
    """7 positions in chunks of 2: three levels, padded chunks, padding at both ends of the sequence."""
    g = torch.Generator().manual_seed(6)
    scores = (3 * torch.randn(1, 7, 1, generator=g, dtype=torch.float64)).requires_grad_()
    values = torch.randn(1, 7, 1, 2, generator=g, dtype=torch.float64).requires_grad_()
    ignore = torch.tensor([[True, False, False, True, False, False, True]])
    assert torch.autograd.gradcheck(lambda s, v: prefix_softmax_pool(s, v, ignore, chunk=2), (scores, values))


@pytest.mark.parametrize("N, chunk", [(1, 4), (5, 2), (16, 4), (17, 4), (129, 4), (300, 16)])
@pytest.mark.parametrize("scale", [3.0, 1e4], ids=["moderate", "huge-scores"])
def test_prefix_softmax_pool_gradients_equal_the_explicit_softmax(N, chunk, scale):
    """The written-out backward (a scan from the end over the forward's grids) against autograd of the N x N softmax."""
    scores, values, ignore = _pool_inputs(N, seed=N + 1, scale=scale)
    weights = torch.randn(*values.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    for mask in (ignore, None):
        s1, v1 = scores.clone().requires_grad_(), values.clone().requires_grad_()
        s2, v2 = scores.clone().requires_grad_(), values.clone().requires_grad_()
        (prefix_softmax_pool(s1, v1, mask, chunk=chunk) * weights).sum().backward()
        reference_mask = torch.zeros_like(ignore) if mask is None else mask
        (_explicit_causal_pool(s2, v2, reference_mask) * weights).sum().backward()
        torch.testing.assert_close(v1.grad, v2.grad, rtol=0, atol=1e-12)
        torch.testing.assert_close(s1.grad, s2.grad, rtol=0, atol=1e-11)


def test_prefix_softmax_pool_refuses_a_chunk_of_one():
    scores, values, _ = _pool_inputs(5)
    with pytest.raises(ValueError, match="chunk must be at least 2"):
        prefix_softmax_pool(scores, values, chunk=1)


def test_causal_equals_the_loop_over_several_chunk_levels():
    """21 positions in chunks of d_h = 4: three levels, a padded last chunk on each, padding at both ends."""
    layer = _attention()
    x = _x(2, 21, D)
    ignore = padding_mask(torch.tensor([21, 15]), 21)
    ignore[1, :2] = True
    torch.testing.assert_close(
        layer(x, ignore, is_causal=True), loop_fastformer(layer, x, ignore, True), rtol=0, atol=1e-12
    )


def _saved_sizes(layer, N, d):
    sizes = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: sizes.append(t.numel()) or t, lambda t: t):
        layer(torch.randn(1, N, d), is_causal=True).sum()
    return sizes


def test_causal_cost_grows_linearly_no_n_by_n_tensor():
    """The causal path never materializes an N x N tensor.

    Every tensor kept for the backward pass has at most N x (d + H) entries (the
    values, with one more feature per head for the softmax's denominator), and
    what is kept grows in proportion to N.
    """
    d, h = 16, 4
    layer = FastSelfAttention(d, h)
    N = 64
    biggest = max(_saved_sizes(layer, N, d))
    assert biggest <= N * (d + h), f"a saved tensor has {biggest} entries, more than N x (d + H) = {N * (d + h)}"
    small, large = sum(_saved_sizes(layer, 256, d)), sum(_saved_sizes(layer, 1024, d))
    assert large <= 4.1 * small, f"4 times the length keeps {large / small:.2f} times the entries"


# --- Ablation options ----------------------------------------------------------------------------


def test_ablations_change_what_they_say():
    x = _x(2, 5, D)
    full = _attention()
    q = full.query(x)
    no_q = _attention(add_query=False)
    torch.testing.assert_close(no_q(x), full(x) - q)

    separate = _attention(share_value=False)
    assert sum(p.numel() for p in separate.parameters()) == sum(p.numel() for p in full.parameters()) + D * D + D
    separate.load_state_dict(full.state_dict(), strict=False)
    separate.value.load_state_dict(full.query.state_dict())
    torch.testing.assert_close(separate(x), full(x))  # a value projection equal to the query's is the shared model

    one_pooling = _attention(key_pooling=False)
    assert _count(full) - _count(one_pooling) == D * D + D + D * H + H
    assert not hasattr(one_pooling, "key") and not hasattr(one_pooling, "key_att")
    qq = one_pooling.query(x)
    _, alpha, _ = full(x, need_weights=True)
    scores = one_pooling.query_att(qq) / math.sqrt(D // H)
    weights = torch.softmax(scores.transpose(1, 2), -1)  # (B, H, N)
    g = torch.einsum("bhn,bnhe->bhe", weights, qq.view(2, 5, H, D // H)).reshape(2, 1, D)
    torch.testing.assert_close(one_pooling(x), one_pooling.transform(g * qq) + qq)
    out, a, b = one_pooling(x, need_weights=True)
    assert b is None and a.shape == (2, H, 5)
    assert "key_pooling=False" in repr(one_pooling)


# --- Layer, encoder, pooler ------------------------------------------------------------------------


def _count(module):
    return sum(p.numel() for p in module.parameters())


def test_layer_structure_and_parameter_count():
    d, h, ff = 32, 4, 64
    layer = FastformerLayer(d, h, d_ff=ff, dropout=0.0)
    attention = 3 * (d * d + d) + 2 * (d * h + h)
    block = attention + (d * d + d) + 2 * 2 * d + (d * ff + ff) + (ff * d + d)
    assert _count(layer) == block
    softmax = SoftmaxEncoderLayer(d, h, d_ff=ff, dropout=0.0)
    assert _count(layer) - _count(softmax) == 2 * (d * h + h)  # the same size, up to the two scoring layers
    assert FastformerLayer(d, h).intermediate.out_features == 4 * d


def test_layer_computes_the_post_norm_block():
    torch.manual_seed(0)
    layer = FastformerLayer(D, H, d_ff=20, dropout=0.0).double()
    x = _x(2, 5, D)
    ignore = padding_mask(torch.tensor([5, 2]), 5)
    a = layer.attention_norm(x + layer.attention_output(layer.attention(x, ignore)))
    expected = layer.output_norm(a + layer.output(torch.nn.functional.gelu(layer.intermediate(a))))
    torch.testing.assert_close(layer(x, ignore), expected)
    assert layer.attention_norm.eps == 1e-12


def test_encoder_stacks_and_shares_layers():
    d, h = 16, 4
    one = _count(FastformerLayer(d, h))
    assert _count(FastformerEncoder(d, h, num_layers=3)) == 3 * one
    shared = FastformerEncoder(d, h, num_layers=3, share_layers=True)
    assert _count(shared) == one and len(shared.layers) == 1
    torch.manual_seed(0)
    shared = FastformerEncoder(D, H, num_layers=2, share_layers=True, dropout=0.0).double()
    x = _x(2, 4, D)
    layer = shared.layers[0]
    torch.testing.assert_close(shared(x), layer(layer(x)))
    assert _count(SoftmaxEncoder(d, h, num_layers=3)) == 3 * _count(SoftmaxEncoderLayer(d, h))
    assert _count(SoftmaxEncoder(d, h, num_layers=3, share_layers=True)) == _count(SoftmaxEncoderLayer(d, h))


@pytest.mark.parametrize("kind", [FastformerEncoder, SoftmaxEncoder])
def test_encoders_respect_padding_and_causality(kind):
    torch.manual_seed(0)
    encoder = kind(D, H, num_layers=2, d_ff=24, dropout=0.0).double()
    x = _x(2, 7, D)
    ignore = padding_mask(torch.tensor([7, 4]), 7)
    noisy = x.clone()
    noisy[ignore] = 1e3
    torch.testing.assert_close(encoder(x, ignore)[~ignore], encoder(noisy, ignore)[~ignore], rtol=0, atol=1e-10)
    out = encoder(x, is_causal=True)
    changed = x.clone()
    changed[:, 5:] = -7.0
    torch.testing.assert_close(encoder(changed, is_causal=True)[:, :5], out[:, :5], rtol=0, atol=1e-12)


def test_attention_pooling_is_a_masked_weighted_average():
    torch.manual_seed(0)
    pool = AttentionPooling(D).double()
    x = _x(2, 5, D)
    ignore = torch.tensor([[False] * 5, [False, False, True, True, True]])
    out, w = pool(x, ignore, need_weights=True)
    assert out.shape == (2, D) and (w[1, 2:] == 0).all()
    scores = pool.att_fc2(torch.tanh(pool.att_fc1(x[1, :2]))).squeeze(-1)
    torch.testing.assert_close(out[1], torch.softmax(scores, 0) @ x[1, :2])
    assert torch.isfinite(pool(x, torch.ones(2, 5, dtype=torch.bool))).all()


# --- Bad input -------------------------------------------------------------------------------------


def test_bad_construction_is_refused():
    with pytest.raises(ValueError, match="divisible by num_heads"):
        FastSelfAttention(10, 3)
    with pytest.raises(ValueError, match="num_heads must be a positive integer"):
        FastSelfAttention(8, 0)
    with pytest.raises(ValueError, match="d_model must be a positive integer"):
        FastSelfAttention(-4, 2)
    with pytest.raises(ValueError, match="init_std"):
        FastSelfAttention(8, 2, init_std=0.0)
    with pytest.raises(ValueError, match="dropout"):
        FastformerLayer(8, 2, dropout=1.5)
    with pytest.raises(ValueError, match="num_layers"):
        FastformerEncoder(8, 2, num_layers=0)
    with pytest.raises(ValueError, match="divisible by num_heads"):
        SoftmaxEncoder(10, 4, num_layers=1)
    with pytest.raises(ValueError, match="d_ff"):
        FastformerLayer(8, 2, d_ff=0)


def test_bad_inputs_get_clear_errors():
    layer = FastSelfAttention(8, 2)
    with pytest.raises(ValueError, match=r"shape \(B, N, d_model\)"):
        layer(torch.randn(5, 8))
    with pytest.raises(ValueError, match="width 6, but this layer has d_model=8"):
        layer(torch.randn(2, 5, 6))
    with pytest.raises(TypeError, match="floating-point"):
        layer(torch.ones(2, 5, 8, dtype=torch.long))
    with pytest.raises(TypeError, match="torch.Tensor"):
        layer([[0.0] * 8])
    with pytest.raises(ValueError, match="empty sequence"):
        layer(torch.randn(2, 0, 8))
    x = torch.randn(2, 5, 8)
    with pytest.raises(TypeError, match="bool tensor"):
        layer(x, torch.zeros(2, 5))
    with pytest.raises(ValueError, match=r"shape \(B, N\) = \(2, 5\)"):
        layer(x, torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"shape \(B, N\)"):
        layer(x, torch.zeros(5, dtype=torch.bool))
    with pytest.raises(ValueError, match="need_weights=True is not available with is_causal=True"):
        layer(x, need_weights=True, is_causal=True)
    encoder = FastformerEncoder(8, 2, num_layers=1)
    with pytest.raises(ValueError, match="width 6"):
        encoder(torch.randn(2, 5, 6))
    with pytest.raises(TypeError, match="bool tensor"):
        encoder(x, torch.zeros(2, 5, dtype=torch.int64))


# --- The mixing and output ablations --------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_mix_add_and_concat_replace_the_products(causal):
    x = _x(2, 6, D)
    ignore = padding_mask(torch.tensor([6, 4]), 6)
    full = _attention()
    added = _attention(mix="add")
    added.load_state_dict(full.state_dict())
    q = full.query(x)
    # the same computation with + in place of ⊙, from the parts
    if causal:
        heads = q.view(2, 6, H, D // H)
        q_bar = prefix_softmax_pool(full._scores(full.query_att, q), heads, ignore).reshape(2, 6, D)
    else:
        _, q_bar = full._pool(full._scores(full.query_att, q), q, ignore)
    p = full.key(x) + q_bar
    if causal:
        k_bar = prefix_softmax_pool(full._scores(full.key_att, p), p.view(2, 6, H, D // H), ignore).reshape(2, 6, D)
    else:
        _, k_bar = full._pool(full._scores(full.key_att, p), p, ignore)
    torch.testing.assert_close(added(x, ignore, is_causal=causal), full.transform(q + k_bar) + q)

    concat = _attention(mix="concat")
    assert _count(concat) == _count(full) + 2 * (2 * D * D + D)
    state = dict(full.state_dict())
    with torch.no_grad():  # [x, g] -> x * 0 + g * 0 + ... : a map that keeps x and adds g is the additive model
        eye = torch.eye(D, dtype=torch.float64)
        for name in ("key_mix", "value_mix"):
            state[f"{name}.weight"] = torch.cat([eye, eye], dim=1)
            state[f"{name}.bias"] = torch.zeros(D, dtype=torch.float64)
    concat.load_state_dict(state)
    torch.testing.assert_close(concat(x, ignore, is_causal=causal), added(x, ignore, is_causal=causal))


def test_with_mix_add_the_second_pooling_ignores_the_global_query():
    """w · (k_i + q̄) = w · k_i + w · q̄: the q̄ term is the same at every position, so softmax drops it."""
    x = _x(2, 6, D)
    added = _attention(mix="add")
    _, _, beta = added(x, need_weights=True)
    k = added.key(x)
    expected = torch.softmax(added._scores(added.key_att, k), dim=1).transpose(1, 2)
    torch.testing.assert_close(beta, expected)


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_add_the_global_query_and_the_global_query_alone(causal):
    x = _x(2, 5, D)
    full = _attention()
    plus_global = _attention(add_query="global")
    plus_global.load_state_dict(full.state_dict())
    only = _attention(global_query_only=True)
    only.load_state_dict({k: v for k, v in full.state_dict().items() if k.startswith("query")})
    assert _count(only) == 2 * (D * D + D) // 2 + D * H + H
    q_bar = only(x, is_causal=causal)
    if not causal:
        assert torch.equal(q_bar, q_bar[:, :1].expand_as(q_bar))  # one vector for every position
    no_q = _attention(add_query=False)
    no_q.load_state_dict(full.state_dict())
    torch.testing.assert_close(plus_global(x, is_causal=causal), no_q(x, is_causal=causal) + q_bar)
    torch.testing.assert_close(full(x, is_causal=causal), no_q(x, is_causal=causal) + full.query(x))


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="mix must be"):
        FastSelfAttention(8, 2, mix="sum")
    with pytest.raises(ValueError, match="add_query must be"):
        FastSelfAttention(8, 2, add_query="local")


# --- Linear (kernelized) and Linformer (low-rank) attention ---------------------------------------


def _random_params(module, seed=0):
    torch.manual_seed(seed)
    module.double()
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0, 0.5)
    return module


def _phi(x):
    return torch.nn.functional.elu(x) + 1


def test_linear_attention_equals_its_quadratic_form():
    """o_i = Σ_j φ(q_i)·φ(k_j) v_j / Σ_j φ(q_i)·φ(k_j), written with the N x N weights, padding left out."""
    layer = _random_params(LinearSelfAttention(D, H))
    x = _x(2, 7, D)
    ignore = padding_mask(torch.tensor([7, 3]), 7)
    q = _phi(layer.query(x)).view(2, 7, H, -1)
    k = _phi(layer.key(x)).view(2, 7, H, -1)
    v = layer.value(x).view(2, 7, H, -1)
    scores = torch.einsum("bihe,bjhe->bhij", q, k).masked_fill(ignore[:, None, None, :], 0.0)
    weights = scores / scores.sum(dim=-1, keepdim=True)
    expected = layer.output(torch.einsum("bhij,bjhe->bihe", weights, v).reshape(2, 7, D))
    torch.testing.assert_close(layer(x, ignore), expected, rtol=0, atol=1e-12)
    scrambled = x.clone()
    scrambled[1, 3:] = 100 * torch.randn(4, D, dtype=torch.float64)
    torch.testing.assert_close(layer(scrambled, ignore)[1, :3], layer(x, ignore)[1, :3], rtol=0, atol=1e-12)
    assert torch.isfinite(layer(x, torch.ones(2, 7, dtype=torch.bool))).all()


def test_linformer_equals_softmax_over_the_mixed_keys_and_values():
    layer = _random_params(LinformerSelfAttention(D, H, max_len=9, k=4))
    assert _count(layer) == 4 * (D * D + D) + 2 * 4 * 9
    x = _x(2, 7, D)
    ignore = padding_mask(torch.tensor([7, 5]), 7)
    q = layer.query(x).view(2, 7, H, -1)
    keep = (~ignore)[..., None].double()
    k = (layer.length_key[:, :7] @ (layer.key(x) * keep)).view(2, 4, H, -1)
    v = (layer.length_value[:, :7] @ (layer.value(x) * keep)).view(2, 4, H, -1)
    weights = torch.softmax(torch.einsum("bihe,brhe->bhir", q, k) / math.sqrt(D // H), dim=-1)
    expected = layer.output(torch.einsum("bhir,brhe->bihe", weights, v).reshape(2, 7, D))
    torch.testing.assert_close(layer(x, ignore), expected, rtol=0, atol=1e-12)
    scrambled = x.clone()
    scrambled[1, 5:] = 100 * torch.randn(2, D, dtype=torch.float64)
    torch.testing.assert_close(layer(scrambled, ignore)[1, :5], layer(x, ignore)[1, :5], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="more than max_len"):
        layer(_x(1, 10, D))
