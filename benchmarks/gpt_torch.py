"""The example's GPT in PyTorch, for ``benchmarks/gpt_step.py``: the model, its weights
copied from ours, and its training step (eager or captured with ``torch.cuda.graph``)."""

from __future__ import annotations

import math

import numpy as np
import torch


def torch_gpt(vocab_size: int, context: int, width: int, num_layers: int, num_heads: int):
    """The example's GPT in PyTorch: the same layers, names and order, dropout 0."""

    class TorchGPT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embedding = torch.nn.Embedding(vocab_size, width)
            self.position_embedding = torch.nn.Embedding(context, width)
            layer = torch.nn.TransformerEncoderLayer(
                width, num_heads, 4 * width, dropout=0.0, activation="gelu",
                batch_first=True, norm_first=True,
            )  # fmt: skip
            self.blocks = torch.nn.TransformerEncoder(
                layer, num_layers, norm=torch.nn.LayerNorm(width), enable_nested_tensor=False
            )
            mask = torch.nn.Transformer.generate_square_subsequent_mask(context)
            self.register_buffer("causal_mask", mask, persistent=False)

        def forward(self, tokens):
            seq = tokens.shape[1]
            positions = torch.arange(seq, device=tokens.device)
            x = self.token_embedding(tokens) + self.position_embedding(positions)
            x = self.blocks(x, mask=self.causal_mask[:seq, :seq], is_causal=True)
            return x @ self.token_embedding.weight.T

    return TorchGPT()


def copy_weights(ours, theirs) -> None:
    """Load our GPT's weights into the PyTorch one: Linear weights transposed (``[in, out]``
    here, ``[out, in]`` there), the q/k/v projections stacked into ``in_proj``."""

    def t(param, transpose=False):
        array = param.numpy()
        return torch.from_numpy(np.ascontiguousarray(array.T if transpose else array))

    with torch.no_grad():
        theirs.token_embedding.weight.copy_(t(ours.token_embedding.weight))
        theirs.position_embedding.weight.copy_(t(ours.position_embedding.weight))
        for a, b in zip(ours.blocks.layers, theirs.blocks.layers):
            attn = a.self_attn
            projections = (attn.q_proj, attn.k_proj, attn.v_proj)
            b.self_attn.in_proj_weight.copy_(torch.cat([t(p.weight, True) for p in projections]))
            b.self_attn.in_proj_bias.copy_(torch.cat([t(p.bias) for p in projections]))
            b.self_attn.out_proj.weight.copy_(t(attn.out_proj.weight, True))
            b.self_attn.out_proj.bias.copy_(t(attn.out_proj.bias))
            for name in ("linear1", "linear2"):
                getattr(b, name).weight.copy_(t(getattr(a, name).weight, True))
                getattr(b, name).bias.copy_(t(getattr(a, name).bias))
            for name in ("norm1", "norm2"):
                getattr(b, name).weight.copy_(t(getattr(a, name).weight))
                getattr(b, name).bias.copy_(t(getattr(a, name).bias))
        theirs.blocks.norm.weight.copy_(t(ours.blocks.norm.weight))
        theirs.blocks.norm.bias.copy_(t(ours.blocks.norm.bias))


def warmup_cosine(step: int, warmup: int, steps: int) -> float:
    """The factor on the peak rate that ``LinearWarmup(CosineAnnealingDecay)`` gives at ``step``."""
    if step < warmup:
        return step / warmup
    return (1.0 + math.cos(math.pi * (step - warmup) / max(steps - warmup, 1))) / 2.0


def torch_training(
    model, level: str, device, learning_rate: float, warmup: int, steps: int,
    weight_decay: float, graph: bool = False,
):  # fmt: skip
    """PyTorch's step for ``model`` and its schedule's ``step``: AdamW (``weight_decay`` on
    2-D weights), clipping, warmup + cosine. ``graph``: the step captured with
    ``torch.cuda.graph`` (a fused AdamW, its rate a device tensor that the schedule fills
    between replays), then replayed.
    """
    params = list(model.parameters())
    rate = (
        dict(lr=torch.tensor(learning_rate, device=device), fused=True, capturable=True)
        if graph
        else dict(lr=learning_rate, foreach=True)
    )
    optimizer = torch.optim.AdamW(
        [
            {"params": [p for p in params if p.ndim == 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.ndim != 2], "weight_decay": 0.0},
        ],
        betas=(0.9, 0.95), eps=1e-8, **rate,
    )  # fmt: skip
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: warmup_cosine(step, warmup, steps)
    )
    low = {"O1": torch.float16, "O2": torch.float16, "bf16": torch.bfloat16}.get(level)
    scaler = torch.amp.GradScaler(device.type, enabled=low == torch.float16)

    def step(x, y):
        with torch.autocast(device.type, dtype=low or torch.float32, enabled=low is not None):
            logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        return loss

    return torch_graph(step) if graph else step, schedule.step


def torch_graph(step):
    """``step`` captured with ``torch.cuda.graph`` at its first call, after one eager call on
    a side stream (as PyTorch's docs ask); every call replays it, the call's tensors first
    copied into the captured ones (none when they are those)."""
    captured = []

    def replay(*inputs):
        if not captured:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                step(*inputs)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                loss = step(*inputs)
            captured.extend([g, loss, inputs])
        g, loss, static = captured
        for mine, given in zip(static, inputs):
            if mine is not given:
                mine.copy_(given)
        g.replay()
        return loss

    return replay
