"""Train a character-level GPT on this repository's documentation, then sample from it.

A GPT-2-style decoder written as a Paddle user writes one: token and position embeddings,
pre-norm ``nn.TransformerEncoderLayer`` blocks (GELU, causal mask), a final LayerNorm and an
output projection tied to the token embedding. It trains with AdamW (weight decay on the 2-D
weights only, through ``apply_decay_param_fun``), linear warmup then cosine decay
(``lr.LinearWarmup`` around ``lr.CosineAnnealingDecay``) and global-norm clipping
(``nn.ClipGradByGlobalNorm``), in fp32, O1, O2 or bfloat16 O2. The corpus is every
``docs/*.md`` concatenated: 90% to train, the last 10% to validate.

    python examples/gpt.py                     # fp32, 200 steps: about a minute on 2 cores
    python examples/gpt.py --level O2          # float16 weights, fp32 masters, loss scaling
    python examples/gpt.py --level bf16        # O2 in bfloat16 (no loss scaling)
    python examples/gpt.py --compare           # fp32, O1, O2 and bf16 on the same text: a table
    python examples/gpt.py --steps 2000 --sample-length 400 --temperature 0.8
    python examples/gpt.py --device gpu --level O1 --batch-size 64

Losses are summed on the device and read once per progress line, so a GPU run does not wait
for the host at every step.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout too

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp import amp, nn, optimizer
from minitorch_amp.utils.progress import progress as progress_bar
from minitorch_amp.utils.progress import write

ROOT = Path(__file__).resolve().parents[1]
LEVELS = ("fp32", "O1", "O2", "bf16")


# ---- the data --------------------------------------------------------------------------------
def load_corpus(folder: Path = ROOT / "docs") -> str:
    """Every ``*.md`` file of ``folder``, in name order, joined by blank lines."""
    files = sorted(folder.glob("*.md"))
    if not files:
        raise FileNotFoundError(
            f"no *.md files in {folder}: the example trains on the repository's docs/ pages; "
            "run it from a checkout"
        )
    return "\n\n".join(f.read_text(encoding="utf-8") for f in files)


class CharTokenizer:
    """One token per distinct character of the corpus."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        return np.array([self.index[c] for c in text], dtype=np.int64)

    def decode(self, ids) -> str:
        return "".join(self.chars[i] for i in ids)


def get_batch(data: np.ndarray, batch_size: int, context: int, rng: np.random.Generator):
    """``batch_size`` random windows of ``context`` tokens and the same windows shifted by one.

    The offsets come from their own NumPy generator, so every level sees the same batches
    whatever dropout and sampling draw from ``mt.seed``'s generator.
    """
    starts = rng.integers(0, len(data) - context - 1, size=batch_size)
    windows = starts[:, None] + np.arange(context + 1)
    tokens = data[windows]
    return mt.to_tensor(tokens[:, :-1]), mt.to_tensor(tokens[:, 1:])


# ---- the model -------------------------------------------------------------------------------
class GPT(nn.Layer):
    """Embeddings, ``num_layers`` pre-norm transformer blocks, LayerNorm, tied output projection.

    ``forward(tokens)`` maps ``[batch, seq]`` token ids (``seq <= context``) to
    ``[batch, seq, vocab_size]`` logits. A block is ``TransformerEncoderLayer`` with
    ``normalize_before=True`` (GPT-2's pre-norm) and a causal mask: position ``i`` attends to
    positions ``0..i``. The logits are ``x @ token_embedding.weight^T``: the output projection
    is the token embedding itself (weight tying), one matrix learned for both.
    """

    def __init__(
        self,
        vocab_size: int,
        context: int = 64,
        width: int = 128,
        num_layers: int = 4,
        num_heads: int = 4,
        dropout: float = 0.1,
    ):
        super().__init__()
        self.context = context
        normal = nn.initializer.Normal(mean=0.0, std=0.02)  # GPT-2's initialisation
        self.token_embedding = nn.Embedding(vocab_size, width, weight_attr=normal)
        self.position_embedding = nn.Embedding(context, width, weight_attr=normal)
        self.dropout = nn.Dropout(dropout)
        block = nn.TransformerEncoderLayer(
            d_model=width,
            nhead=num_heads,
            dim_feedforward=4 * width,
            dropout=dropout,
            activation="gelu",
            normalize_before=True,
            weight_attr=normal,
        )
        self.blocks = nn.TransformerEncoder(block, num_layers, norm=nn.LayerNorm(width))
        causal = nn.Transformer.generate_square_subsequent_mask(context)  # 0 or -inf
        self.register_buffer("causal_mask", causal, persistable=False)

    def forward(self, tokens: mt.Tensor) -> mt.Tensor:
        seq = tokens.shape[1]
        if seq > self.context:
            raise ValueError(f"GPT: {seq} tokens given, the context is {self.context}")
        positions = mt.arange(seq)
        x = self.dropout(self.token_embedding(tokens) + self.position_embedding(positions))
        x = self.blocks(x, src_mask=self.causal_mask[:seq, :seq])
        return mt.matmul(x, self.token_embedding.weight, transpose_y=True)  # tied weights

    @mt.no_grad()
    def generate(self, tokens: mt.Tensor, length: int, temperature: float = 1.0, top_k=None):
        """Append ``length`` sampled tokens to ``tokens`` ``[batch, seq]``; return all of them.

        Each new token is drawn from ``softmax(logits / temperature)`` of the last position,
        restricted to the ``top_k`` most likely tokens when ``top_k`` is given. The model
        sees the last ``context`` tokens.
        """
        if temperature <= 0:
            raise ValueError(f"generate: temperature must be > 0, got {temperature}")
        if top_k is not None and top_k < 1:
            raise ValueError(f"generate: top_k must be at least 1 (or None), got {top_k}")
        was_training = self.training
        self.eval()
        for _ in range(length):
            logits = self(tokens[:, -self.context :])[:, -1, :].astype("float32") / temperature
            if top_k is not None:
                kth = mt.topk(logits, min(top_k, logits.shape[-1]))[0][:, -1:]
                logits = mt.masked_fill(logits, logits < kth, float("-inf"))
            next_token = mt.multinomial(F.softmax(logits, axis=-1), num_samples=1)
            tokens = mt.concat([tokens, next_token], axis=1)
        if was_training:
            self.train()
        return tokens


def build_optimizer(model: GPT, learning_rate: float, steps: int, warmup: int, weight_decay):
    """AdamW with decay on the 2-D weights (not biases, LayerNorms), warmup + cosine, clipping."""
    decay = {p.name for p in model.parameters() if p.ndim == 2}
    cosine = optimizer.lr.CosineAnnealingDecay(learning_rate, T_max=max(steps - warmup, 1))
    schedule = optimizer.lr.LinearWarmup(cosine, warmup, start_lr=0.0, end_lr=learning_rate)
    opt = optimizer.AdamW(
        learning_rate=schedule,
        beta1=0.9,
        beta2=0.95,
        parameters=model.parameters(),
        weight_decay=weight_decay,
        apply_decay_param_fun=lambda name: name in decay,
        grad_clip=nn.ClipGradByGlobalNorm(clip_norm=1.0),
    )
    return opt, schedule


# ---- training --------------------------------------------------------------------------------
def amp_settings(level: str) -> dict:
    """``auto_cast``'s arguments for ``level``: enabled, its O-level and its 16-bit dtype."""
    if level not in LEVELS:
        raise ValueError(f"level {level!r} is not available; choose one of {LEVELS}")
    dtype = "bfloat16" if level == "bf16" else "float16"
    return {"enable": level != "fp32", "level": "O1" if level == "O1" else "O2", "dtype": dtype}


def loss_fn(model: GPT, x: mt.Tensor, y: mt.Tensor, cast: dict) -> mt.Tensor:
    """Mean cross-entropy of the next token, the logits widened to float32 first."""
    with amp.auto_cast(**cast):
        logits = model(x)
    logits = logits.astype("float32")
    return F.cross_entropy(logits.reshape([-1, logits.shape[-1]]), y.reshape([-1]))


@mt.no_grad()
def estimate_loss(model: GPT, data, batches: int, batch_size: int, cast: dict, seed: int) -> float:
    """Mean loss over ``batches`` fixed batches of ``data``, dropout off."""
    was_training = model.training
    model.eval()
    rng = np.random.default_rng(seed)
    total = mt.zeros([], dtype="float32")
    for _ in range(batches):
        total = total + loss_fn(model, *get_batch(data, batch_size, model.context, rng), cast)
    if was_training:
        model.train()
    return total.item() / batches


def train(
    level="fp32",
    steps=200,
    batch_size=16,
    context=64,
    width=128,
    num_layers=4,
    num_heads=4,
    dropout=0.1,
    learning_rate=1e-3,
    warmup=20,
    weight_decay=0.1,
    eval_every=50,
    eval_batches=4,
    seed=0,
    progress=False,
    log=print,
    text=None,
):
    """Train a GPT on ``text`` (default: the docs); return ``(model, tokenizer, history)``.

    ``history`` has one ``(step, train loss, val loss)`` per evaluation: the train loss is the
    mean over the steps since the previous one, the val loss is :func:`estimate_loss` on the
    held-out tenth of the corpus.
    """
    cast = amp_settings(level)
    text = load_corpus() if text is None else text
    tokenizer = CharTokenizer(text)
    data = tokenizer.encode(text)
    split = int(0.9 * len(data))
    train_data, val_data = data[:split], data[split:]
    mt.seed(seed)
    model = GPT(tokenizer.vocab_size, context, width, num_layers, num_heads, dropout)
    opt, schedule = build_optimizer(model, learning_rate, steps, warmup, weight_decay)
    if level in ("O2", "bf16"):
        model, opt = amp.decorate(models=model, optimizers=opt, level="O2", dtype=cast["dtype"])
    # bfloat16 has float32's exponent range: nothing underflows, so no loss scaling
    scaler = amp.GradScaler(enable=cast["enable"] and cast["dtype"] == "float16")
    rng = np.random.default_rng(seed)
    history, total, since = [], mt.zeros([], dtype="float32"), 0
    numbers = range(1, steps + 1)
    for step in progress_bar(numbers, desc=f"{level} GPT") if progress else numbers:
        x, y = get_batch(train_data, batch_size, context, rng)
        loss = loss_fn(model, x, y, cast)
        scaler.scale(loss).backward()
        scaler.step(opt)  # unscales, clips, updates (skipped if a gradient overflowed)
        scaler.update()
        opt.clear_grad()
        schedule.step()
        total, since = total + loss.detach(), since + 1
        if step % eval_every == 0 or step == steps:
            train_loss = total.item() / since
            val_loss = estimate_loss(model, val_data, eval_batches, batch_size, cast, seed + 1)
            history.append((step, train_loss, val_loss))
            log(
                f"step {step:5d}/{steps}: train loss {train_loss:.4f}, val loss {val_loss:.4f}, "
                f"lr {schedule():.2e}"
            )
            total, since = mt.zeros([], dtype="float32"), 0
    return model, tokenizer, history


def compare(**kwargs) -> None:
    """Train every level from the same weights on the same batches; print a table."""
    rows = []
    for level in LEVELS:
        start = time.perf_counter()
        _, _, history = train(level=level, progress=True, log=lambda *_: None, **kwargs)
        rows.append((level, time.perf_counter() - start, *history[-1][1:]))
    print(f"{'level':<6}{'time (s)':>10}{'train loss':>12}{'val loss':>10}{'val vs fp32':>13}")
    for level, seconds, train_loss, val_loss in rows:
        change = 100 * (val_loss / rows[0][3] - 1)
        print(f"{level:<6}{seconds:>10.1f}{train_loss:>12.4f}{val_loss:>10.4f}{change:>+12.3f}%")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--level", default="fp32", choices=LEVELS, help="precision")
    parser.add_argument("--steps", type=int, default=200, help="optimizer steps")
    parser.add_argument("--batch-size", type=int, default=16, help="windows per step")
    parser.add_argument("--context", type=int, default=64, help="tokens per window")
    parser.add_argument("--width", type=int, default=128, help="embedding width")
    parser.add_argument("--layers", type=int, default=4, help="transformer blocks")
    parser.add_argument("--heads", type=int, default=4, help="attention heads per block")
    parser.add_argument("--dropout", type=float, default=0.1, help="dropout everywhere")
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="peak learning rate")
    parser.add_argument("--warmup", type=int, default=20, help="linear warmup steps")
    parser.add_argument("--weight-decay", type=float, default=0.1, help="AdamW's coefficient")
    parser.add_argument("--eval-every", type=int, default=50, help="steps between evaluations")
    parser.add_argument("--sample-length", type=int, default=80, help="characters to sample")
    parser.add_argument("--temperature", type=float, default=0.8, help="sampling temperature")
    parser.add_argument("--top-k", type=int, default=10, help="sample among the k most likely")
    parser.add_argument("--prompt", default="The ", help="text the sample starts from")
    parser.add_argument("--seed", type=int, default=0, help="weights, batches, dropout, sample")
    parser.add_argument("--compare", action="store_true", help="train every level; a table")
    parser.add_argument(
        "--device", default=None, help="'cpu', 'gpu' or 'gpu:N'; None: the GPU if usable"
    )
    args = parser.parse_args(argv)
    for name in ("steps", "batch_size", "context", "width", "layers", "heads", "eval_every"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.width % args.heads:
        parser.error(f"--width ({args.width}) must be a multiple of --heads ({args.heads})")
    if not 0 < args.warmup < args.steps:
        parser.error(f"--warmup must be between 1 and --steps - 1 ({args.steps - 1})")
    if args.temperature <= 0 or args.top_k < 1 or args.sample_length < 0:
        parser.error(  # (checked before training, not after it)
            "--temperature must be > 0, --top-k at least 1 and --sample-length at least 0; "
            f"got {args.temperature}, {args.top_k} and {args.sample_length}"
        )
    if args.device is not None:
        mt.set_device(args.device)

    text = load_corpus()
    print(
        f"GPT on {mt.get_device()}, {'every level' if args.compare else args.level}: "
        f"{args.layers} layers, {args.heads} heads, "
        f"width {args.width}, context {args.context}, batch {args.batch_size}, {args.steps} steps"
    )
    print(f"corpus: docs/*.md, {len(text):,} characters ({len(set(text))} distinct), 90% train")
    sizes = dict(
        steps=args.steps,
        batch_size=args.batch_size,
        context=args.context,
        width=args.width,
        num_layers=args.layers,
        num_heads=args.heads,
        dropout=args.dropout,
        learning_rate=args.learning_rate,
        warmup=args.warmup,
        weight_decay=args.weight_decay,
        eval_every=args.eval_every,
        seed=args.seed,
        text=text,
    )
    if args.compare:
        compare(**sizes)
        return
    start = time.perf_counter()
    model, tokenizer, history = train(level=args.level, progress=True, log=write, **sizes)
    seconds = time.perf_counter() - start
    _, train_loss, val_loss = history[-1]
    print(
        f"final loss: train {train_loss:.4f}, val {val_loss:.4f} (uniform guess: "
        f"{math.log(tokenizer.vocab_size):.4f}); {seconds:.1f} s, "
        f"{1e3 * seconds / args.steps:.0f} ms/step"
    )
    prompt = "".join(c for c in args.prompt if c in tokenizer.index) or tokenizer.chars[0]
    tokens = mt.to_tensor(tokenizer.encode(prompt)[None, :])
    out = model.generate(tokens, args.sample_length, args.temperature, args.top_k)
    print(f"sample (temperature {args.temperature}, top-k {args.top_k}):")
    print(tokenizer.decode(out.numpy()[0].tolist()))


if __name__ == "__main__":
    main()
