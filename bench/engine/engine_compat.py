"""What curve_parity.py needs to feed a PyTorch model exactly what the engine sees, re-implemented
from the engine's sources rather than called: the SplitMix64 generator and Box–Muller sampler
(kernels/model/rng.h), the initial weights (Transformer::InitParams), the corpus split, unique
windows and per-epoch keyed permutations (kernels/data/token_corpus.cc, permutation.h), the learning-rate
schedule (kernels/train/schedule.h) and the checkpoint format (kernels/train/checkpoint.h).

Everything here is plain Python + NumPy; nothing imports torch.
"""
import math
import struct

import numpy as np

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(z):
    """SplitMix64's finaliser on a uint64 array (wrapping arithmetic, as in C++)."""
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def mix(x):
    return int(_mix(np.array([x & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))[0])


class Rng:
    """kernels/model/rng.h: Next() = Mix(seed ^ Mix(counter++))."""

    def __init__(self, seed, counter=0):
        self.seed = seed & 0xFFFFFFFFFFFFFFFF
        self.counter = counter

    def next_block(self, count):
        c = np.arange(self.counter, self.counter + count, dtype=np.uint64)
        self.counter += count
        return _mix(np.uint64(self.seed) ^ _mix(c))

    def normals(self, count):
        """`count` successive Normal() draws (each takes u1 then u2)."""
        words = self.next_block(2 * count)
        uni = (words >> np.uint64(11)).astype(np.float64) * 2.0**-53
        u1 = 1.0 - uni[0::2]
        u2 = uni[1::2]
        return np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586 * u2)


class KeyedPermutation:
    """kernels/data/permutation.h: a 4-round balanced Feistel network over the smallest even-bit
    power of two ≥ n, cycle-walking back into [0, n)."""

    def __init__(self, n, key):
        bits = 2
        while bits < 62 and (1 << bits) < n:
            bits += 2
        self.n, self.key, self.half = n, key & 0xFFFFFFFFFFFFFFFF, bits // 2
        self.mask = (1 << self.half) - 1

    def _encrypt(self, x):
        left, right = x >> self.half, x & self.mask
        for r in range(4):
            f = mix(self.key ^ mix((right + (r << 56)) & 0xFFFFFFFFFFFFFFFF)) & self.mask
            left, right = right, left ^ f
        return (left << self.half) | right

    def __call__(self, i):
        x = self._encrypt(i)
        while x >= self.n:
            x = self._encrypt(x)
        return x


class Corpus:
    """TokenCorpus over a raw byte file: the split, the unique windows, the epoch order and the
    eval slice."""

    def __init__(self, path, seq_len, seed, validation_fraction, unique_tokens, subset="seeded"):
        with open(path, "rb") as f:
            self.bytes = np.frombuffer(f.read(), dtype=np.uint8)
        size = len(self.bytes)
        self.seq = seq_len
        self.seed = seed
        self.split = int(float(size) * (1.0 - validation_fraction))
        train_windows = (self.split - 1) // seq_len if self.split > seq_len else 0
        self.validation_windows = ((size - self.split - 1) // seq_len
                                   if size - self.split > seq_len else 0)
        n = unique_tokens // seq_len if unique_tokens > 0 else train_windows
        if n > train_windows or n == 0 or self.validation_windows == 0:
            raise ValueError(f"corpus {path}: {train_windows} training windows, asked for {n}")
        self.n = n
        if subset == "prefix":  # SubsetMode::kPrefix: the first n windows of the split
            self.subset = lambda j: j
        else:  # SubsetMode::kSeeded: n windows spread over the split, nested in n for one seed
            self.subset = KeyedPermutation(train_windows, mix(seed ^ 0x5EED5EED))

    def _epoch_order(self, epoch):
        return KeyedPermutation(self.n, mix((self.seed + 0x9E37 * (epoch + 1)) & 0xFFFFFFFFFFFFFFFF))

    def _window(self, start):
        w = self.bytes[start:start + self.seq + 1].astype(np.int64)
        return w[:-1], w[1:]

    def training(self, cursor, count):
        """Windows cursor..cursor+count−1 as (inputs, targets) arrays [count, S]."""
        n = self.n
        xs, ys = [], []
        for g in range(cursor, cursor + count):
            x, y = self._window(self.subset(self._epoch_order(g // n)(g % n)) * self.seq)
            xs.append(x)
            ys.append(y)
        return np.stack(xs), np.stack(ys)

    def random_training(self, generator, count):
        """`count` windows at uniform random byte offsets of the whole training split (the usual
        independent-loader way: no unique budget, no epochs); `generator` is a numpy Generator."""
        starts = generator.integers(0, self.split - self.seq - 1, size=count, endpoint=True)
        xs, ys = zip(*(self._window(int(s)) for s in starts))
        return np.stack(xs), np.stack(ys)

    def validation(self, count):
        """The fixed first `count` held-out windows (the engine evaluates exactly these)."""
        count = min(count, self.validation_windows)
        xs, ys = zip(*(self._window(self.split + i * self.seq) for i in range(count)))
        return np.stack(xs), np.stack(ys)


def learning_rate(step, total, lr, warmup, min_lr):
    """schedule.h, cosine: linear warmup (step+1)/warmup, then cosine to min_lr; 0-based step."""
    if step < warmup:
        return lr * (step + 1) / warmup
    span = max(1, total - warmup)
    progress = min(1.0, (step - warmup) / span)
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def engine_tensors(m):
    """The engine's flat parameter layout (Transformer::Allocate): [(name, shape, is_norm)]."""
    d, dh = m["d_model"], m["d_model"] // m["heads"]
    out = [("wte", (256, d), False)]
    for layer in range(m["layers"]):
        p = f"layer{layer}."
        out += [(p + "attn_norm", (d,), True), (p + "w_qkv", (3 * m["heads"] * dh, d), False),
                (p + "w_o", (d, d), False), (p + "ffn_norm", (d,), True)]
        if is_moe_layer(m, layer):
            e, de, dse = m["experts"], m["d_expert"], m["d_shared"]
            out += [(p + "router", (e, d), False), (p + "experts.w13", (e, 2 * de, d), False),
                    (p + "experts.w2", (e, d, de), False)]
            if dse > 0:
                out += [(p + "shared.w13", (2 * dse, d), False),
                        (p + "shared.w2", (d, dse), False)]
        else:
            out += [(p + "w13", (2 * m["d_ffn"], d), False), (p + "w2", (d, m["d_ffn"]), False)]
    out.append(("final_norm", (d,), True))
    if not m.get("tied", False):
        out.append(("head", (256, d), False))
    return out


def is_moe_layer(m, layer):
    return m["arch"] == "moe" and layer > 0  # 1dense+SE: layer 0 dense, the rest MoE


def engine_init(m, seed, init_std=0.02):
    """InitParams: N(0, std) matrices in layout order, residual outputs (w_o, *w2) × 1/√(2L),
    norm weights 1 (they draw nothing). Returns {name: float32 array}."""
    rng = Rng(seed)
    out_scale = 1.0 / math.sqrt(2.0 * m["layers"])
    params = {}
    for name, shape, is_norm in engine_tensors(m):
        if is_norm:
            params[name] = np.ones(shape, dtype=np.float32)
            continue
        std = init_std * (out_scale if name.endswith("w_o") or name.endswith("w2") else 1.0)
        params[name] = (std * rng.normals(int(np.prod(shape)))).astype(np.float32).reshape(shape)
    return params


def read_checkpoint(path, m):
    """Checkpoint file → (header dict, {name: (params, adam_m, adam_v)} as float32 arrays)."""
    with open(path, "rb") as f:
        blob = f.read()
    if blob[:8] != b"PARITYCK":
        raise ValueError(f"{path}: not a parity checkpoint")
    off = 8
    version, fingerprint, step, cursor, rseed, rcounter, layers = struct.unpack_from(
        "<IQqqQQI", blob, off)
    off += struct.calcsize("<IQqqQQI")
    biases = []
    for _ in range(layers):
        (e,) = struct.unpack_from("<I", blob, off)
        off += 4
        biases.append(np.frombuffer(blob, np.float32, e, off).copy())
        off += 4 * e
    (n,) = struct.unpack_from("<Q", blob, off)
    off += 8
    arrays = [np.frombuffer(blob, np.float32, n, off + 4 * n * i) for i in range(3)]
    tensors, pos = {}, 0
    for name, shape, _ in engine_tensors(m):
        size = int(np.prod(shape))
        tensors[name] = tuple(a[pos:pos + size].reshape(shape) for a in arrays)
        pos += size
    if pos != n:
        raise ValueError(f"{path}: {n} parameters, layout has {pos}")
    header = dict(version=version, step=step, cursor=cursor, biases=biases,
                  rng=(rseed, rcounter), fingerprint=fingerprint)
    return header, tensors
