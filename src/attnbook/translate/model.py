"""The model of a run: its configuration from the run's settings, and the model built from it.

``--arch transformer`` is chapter 7's :class:`~attnbook.transformer.Transformer`,
``--arch rnn`` chapter 3's GRU encoder-decoder with attention
(:class:`~attnbook.rnn.Seq2Seq`). :data:`MODEL_FIELDS` says which setting
fills which field of each model's configuration; the rules those fields obey
are the configuration's own, and an error it raises comes back in the words of
the command line (``num_heads (3)`` becomes ``--num-heads 3``).
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

import torch
from torch import nn

from ..decode import EXTRA_OUTPUT_TOKENS
from ..rnn import Seq2Seq, Seq2SeqConfig
from ..transformer import Transformer, TransformerConfig
from .console import CommandError
from .settings import AUTO, RunSettings, flag

__all__ = [
    "MAX_POSITIONS",
    "MODEL_FIELDS",
    "model_config",
    "build_model",
    "UniformDropout",
    "check_model_settings",
    "precision",
    "native_bfloat16",
    "GPU_MODEL",
    "fit_to_device",
]

#: The positional table's length: the longest sentence the model can read, and the longest it writes.
MAX_POSITIONS = 256

_MODELS = {"transformer": (Transformer, TransformerConfig), "rnn": (Seq2Seq, Seq2SeqConfig)}

#: For each architecture: the field of its configuration, and the setting that fills it.
MODEL_FIELDS = {
    "transformer": {
        "d_model": "d_model",
        "num_heads": "num_heads",
        "num_layers": "num_layers",
        "d_ff": "d_ff",
        "dropout": "dropout",
        "norm_first": "norm_first",
    },
    "rnn": {"embed_size": "d_model", "hidden_size": "d_model", "num_layers": "num_layers", "dropout": "dropout"},
}
# What each architecture's configuration takes besides the settings.
_FIXED = {
    "transformer": {"share_embeddings": False, "max_len": MAX_POSITIONS, "pad_id": 0},
    "rnn": {"attention": True, "pad_id": 0},
}


def model_config(settings: RunSettings, src_size: int, tgt_size: int) -> dict:
    """The model's configuration (the fields of its config dataclass) from the run's settings."""
    values = {name: getattr(settings, setting) for name, setting in MODEL_FIELDS[settings.arch].items()}
    if values.get("dropout") == AUTO:
        values["dropout"] = 0.0  # the training session decides, once it knows how many epochs the budget allows
    return {"src_vocab_size": src_size, "tgt_vocab_size": tgt_size, **values, **_FIXED[settings.arch]}


def build_model(arch: str, config: dict) -> nn.Module:
    """A fresh model of the run's architecture from its configuration dict, its dropout a :class:`UniformDropout`."""
    if arch not in _MODELS:
        raise CommandError(f"unknown architecture {arch!r} in the run's configuration (transformer or rnn)")
    model_class, config_class = _MODELS[arch]
    try:
        model = model_class(config_class(**config))
    except (TypeError, ValueError) as err:
        raise CommandError(f"this model configuration cannot be built: {err}") from None
    for parent in list(model.modules()):
        for name, child in parent.named_children():
            if type(child) is nn.Dropout:
                setattr(parent, name, UniformDropout(child.p))
    return model


class UniformDropout(nn.Dropout):
    """Dropout whose mask on a CPU keeps the entries where a uniform number in [0, 1) is at least ``p``.

    The same dropout as :class:`torch.nn.Dropout` (each entry zeroed with chance
    ``p``, the rest scaled by ``1 / (1 - p)``), with its mask drawn another way:
    on a CPU, PyTorch's draws its Bernoulli numbers one at a time, and on a
    batch of the command line's default size a mask drawn from uniform numbers
    takes half as long, forward and backward (about 0.5 ms against 1.0 ms, a
    dozen times a step). On other devices, where PyTorch's dropout is one fused
    kernel, it is PyTorch's. The model built for a run uses it in place of
    :class:`torch.nn.Dropout`; the chapters keep PyTorch's, whose random numbers
    their stored outputs were computed with.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0 or x.device.type != "cpu":
            return super().forward(x)
        if self.p == 1.0:
            return x * 0.0
        keep = torch.rand(x.shape, dtype=torch.float32) >= self.p
        return x * keep.to(x.dtype).mul_(1.0 / (1.0 - self.p))


def precision(dtype: str, device: torch.device | None = None) -> tuple[torch.dtype, torch.dtype | None]:
    """``--dtype``'s weights dtype, and the dtype of the matrix products when training in mixed precision.

    ``bfloat16`` keeps the weights (and the optimizer and the loss) in float32 and
    trains with :func:`torch.autocast`; ``auto`` is ``bfloat16`` where ``device``
    multiplies bfloat16 matrices natively (:func:`native_bfloat16`), else
    ``float32``. A trained model is used in its weights' dtype.
    """
    if dtype == AUTO:
        dtype = "bfloat16" if device is not None and native_bfloat16(device) else "float32"
    if dtype == "bfloat16":
        return torch.float32, torch.bfloat16
    return getattr(torch, dtype), None


def native_bfloat16(device: torch.device) -> bool:
    """Whether ``device`` has instructions for bfloat16 matrix products (elsewhere they are emulated, far slower).

    A processor with AVX512-BF16 or AMX, unless ``ONEDNN_MAX_CPU_ISA`` caps
    oneDNN below those instructions; a CUDA GPU that supports bfloat16.
    """
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "ALL").upper()
    if device.type != "cpu" or not (cap == "ALL" or "BF16" in cap or "AMX" in cap or cap.startswith("AVX10")):
        return False
    # torch.cpu reads the processor's flags; these helpers are private, so their absence means "no"
    helpers = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    return any(callable(helper) and helper() for helper in helpers)


def check_model_settings(settings: RunSettings) -> None:
    """Raise a :class:`CommandError` unless the settings make a model, before any data is read.

    The model's configuration judges (with placeholder vocabularies); its
    complaint is worded with the command line's options.
    """
    try:
        _MODELS[settings.arch][1](**model_config(settings, 5, 5))
    except (TypeError, ValueError) as err:
        raise CommandError(_in_option_words(str(err), settings.arch)) from None
    longest = MAX_POSITIONS - EXTRA_OUTPUT_TOKENS  # a sentence and its translation must fit in the table
    if settings.max_length > longest:
        raise CommandError(f"--max-length must be at most {longest} (the positional table holds {MAX_POSITIONS})")


def _in_option_words(message: str, arch: str) -> str:
    """A configuration's error in the command line's words: ``TransformerConfig.num_heads (3)`` → ``--num-heads 3``."""
    for name, setting in MODEL_FIELDS[arch].items():
        pattern = rf"\b(?:\w+Config\.)?{name}\b(?: \(([^)]*)\))?"
        message = re.sub(pattern, lambda m, s=setting: flag(s) + (f" {m[1]}" if m[1] else ""), message)
    return message


#: The model a run on a GPU gets when its command line names no size: the paper's base model. A GPU multiplies
#: its matrices fast enough that the CPU's small defaults leave it idle (on one H100, the base size trained
#: about fifteen times more target tokens a second than the defaults, and scored higher within minutes).
GPU_MODEL = {"d_model": 512, "num_heads": 8, "num_layers": 6, "d_ff": 2048}
#: The most padded tokens a batch holds on a GPU, whatever its memory: the size measured on one H100; and the
#: share of the card's memory that a batch's activations may take (the weights, the optimizer and PyTorch's own
#: caches take the rest).
GPU_BATCH_TOKENS, GPU_MEMORY_SHARE = 8000, 0.35


def activation_bytes_per_token(settings: RunSettings, vocab_size: int) -> float:
    """About how many bytes of activations a target token costs in a training step (forward and backward).

    Each layer keeps about 34 numbers per token and per unit of width for its
    backward pass (attention's inputs and outputs, the feed-forward's hidden
    layer counted by its width), in 2-byte bfloat16; the output layer keeps the
    token's logits, their softmax and their gradient in float32.
    """
    layers = 2 * settings.num_layers  # the encoder's and the decoder's
    per_layer = 2 * (34 * settings.d_model + 2 * settings.d_ff)
    return layers * per_layer + 3 * 4 * vocab_size


def fit_to_device(
    settings: RunSettings, chosen: set[str], device: torch.device, vocab_size: int
) -> tuple[RunSettings, list[str]]:
    """The settings that use ``device``, and one line for each change saying why.

    On a GPU, a model size that the command line left to the defaults becomes
    :data:`GPU_MODEL`, and the batch holds as many tokens as
    :data:`GPU_MEMORY_SHARE` of the card's memory allows for that model, at most
    :data:`GPU_BATCH_TOKENS`. ``chosen`` names the settings the command line
    gave: those are never changed. On a CPU nothing changes.
    """
    if device.type != "cuda" or settings.arch != "transformer":
        return settings, []
    reasons = []
    model = {k: v for k, v in GPU_MODEL.items() if k not in chosen}
    if model == GPU_MODEL:
        settings = replace(settings, **model)
        reasons.append("a GPU: the paper's base model (" + ", ".join(f"{flag(k)} {v}" for k, v in model.items()) + ")")
    if "batch_tokens" not in chosen:
        memory = torch.cuda.get_device_properties(device).total_memory
        fits = GPU_MEMORY_SHARE * memory / activation_bytes_per_token(settings, vocab_size)
        batch = int(min(GPU_BATCH_TOKENS, fits) // 100 * 100)
        settings = replace(settings, batch_tokens=max(batch, 100))
        reasons.append(
            f"a GPU with {memory / 2**30:.0f} GiB: --batch-tokens {settings.batch_tokens:,} "
            f"({'the most this model trains well with' if batch >= GPU_BATCH_TOKENS else 'what its memory holds'})"
        )
    return settings, reasons
