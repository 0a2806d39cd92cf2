#!/usr/bin/env python3
"""Train the tiny GLM-4.7-Flash-architecture model on the KJV corpus and
export it as deepseek2 GGUF files that glmw loads.

    python3 tools/train.py --out OUT [--steps N] [--device cuda|cpu] [--seed 1234]

Needs: torch, numpy, tokenizers (for encoding; tools/data/tokenizer.json) and
the text in tools/data (tools/corpus.py, tools/tokenizer.py make them).
No `gguf` package: tools/gguf_io.py writes the files.

Outputs in OUT:
  glmw-tiny-f32.gguf     every tensor F32
  glmw-tiny-q4_0.gguf    the Q4_0 mix (Q4_0 where the real Unsloth file has
                         Q4_0, Q8_0 where it has a wider type, F32 for norms,
                         router and bias, as in the real file)
  loss.tsv               step, train loss, held-out ppl (every --eval-every), lr, seconds
  ppl.json               held-out perplexities (F32 and Q4_0-mix weights), computed
                         the way `glmw perplexity --ctx N` computes them, plus a
                         greedy continuation for a fixture
  train.log              the run's printout

The forward pass is glmw's CPU reference (src/reference) written for
batches; its symbols follow llama.cpp's deepseek2 graph (model-spec §4):
  h = rms(x)·attn_norm;  q = q_b · (rms(q_a·h)·q_a_norm) → per head [nope ‖ rope]
  [c ‖ k_pe] = kv_a_mqa · h;  c = rms(c)·kv_a_norm;  rope (adjacent pairs) on q_pe, k_pe
  k_nope_h = K_b[h]ᵀ c,  v_h = V_b[h] c  (the naive MLA form, equal to the absorbed one)
  attention scale 1/sqrt(nope + rope), causal softmax;  x += attn_output · [v heads]
  h2 = rms(x)·ffn_norm;  block 0: SwiGLU;  others: sigmoid router, bias-for-selection,
  top-k, renormalised, ×scale, routed SwiGLU experts + shared expert;  x += ffn
  logits = output · (rms(x)·output_norm)
All RMSNorms use eps 1e-5, as llama.cpp does for GLM.
"""

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_io as gw  # noqa: E402
import tokenizer as tk  # noqa: E402


@dataclass
class Cfg:
    n_vocab: int = 2048
    n_embd: int = 256
    n_layer: int = 4
    n_dense: int = 1  # leading dense blocks (GLM: 1)
    n_head: int = 4
    n_lora_q: int = 96
    n_lora_kv: int = 64
    n_nope: int = 64
    n_rope: int = 32
    n_v: int = 64
    n_ff: int = 512
    n_ff_exp: int = 64
    n_expert: int = 8
    n_expert_used: int = 2
    n_expert_shared: int = 1
    expert_weights_scale: float = 1.8
    expert_weights_norm: bool = True
    rope_base: float = 10000.0
    eps: float = 1e-5
    n_ctx: int = 512

    @property
    def n_qk(self):
        return self.n_nope + self.n_rope

    @staticmethod
    def from_gguf(md):
        """The config a GGUF written by export() describes."""
        g = lambda k: md[f"deepseek2.{k}"]  # noqa: E731
        return Cfg(n_vocab=len(md["tokenizer.ggml.tokens"]), n_embd=g("embedding_length"),
                   n_layer=g("block_count"), n_dense=g("leading_dense_block_count"),
                   n_head=g("attention.head_count"), n_lora_q=g("attention.q_lora_rank"),
                   n_lora_kv=g("attention.kv_lora_rank"),
                   n_nope=g("attention.key_length_mla") - g("rope.dimension_count"),
                   n_rope=g("rope.dimension_count"), n_v=g("attention.value_length_mla"),
                   n_ff=g("feed_forward_length"), n_ff_exp=g("expert_feed_forward_length"),
                   n_expert=g("expert_count"), n_expert_used=g("expert_used_count"),
                   n_expert_shared=g("expert_shared_count"),
                   expert_weights_scale=g("expert_weights_scale"), expert_weights_norm=g("expert_weights_norm"),
                   rope_base=g("rope.freq_base"), eps=g("attention.layer_norm_rms_epsilon"),
                   n_ctx=g("context_length"))


def rms(x, g, eps):
    """ggml's RMSNorm in f32: x / sqrt(mean(x²) + eps) · g."""
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


def rope_tables(c, n, device):
    """cos/sin [n, n_rope/2]: θ_i = pos · base^(−2i/n_rope), in f64 as glmw does."""
    pos = torch.arange(n, dtype=torch.float64)
    theta_scale = c.rope_base ** (-2.0 / c.n_rope)
    th = pos[:, None] * theta_scale ** torch.arange(c.n_rope // 2, dtype=torch.float64)[None, :]
    return th.cos().float().to(device), th.sin().float().to(device)


def rope(x, cos, sin):
    """ggml "normal" RoPE: rotate adjacent pairs (2i, 2i+1). x [..., T, ?, n_rope]."""
    x2 = x.float().unflatten(-1, (-1, 2))
    a, b = x2[..., 0], x2[..., 1]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)


def attend(q, k, v, scale):
    """Causal softmax attention, [B,H,T,*], softmax in f32. Written out
    rather than F.scaled_dot_product_attention, whose fused backward kernels
    are not deterministic."""
    T = q.shape[2]
    s = torch.matmul(q, k.transpose(-1, -2)).float() * scale
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    p = torch.softmax(s.masked_fill(mask, float("-inf")), -1)
    return torch.matmul(p.to(v.dtype), v)


class Block(nn.Module):
    """One deepseek2 block. Parameter shapes are the GGUF shapes reversed
    (numpy/torch order), so export is a plain copy."""

    def __init__(self, c, il):
        super().__init__()
        self.c, self.il = c, il
        self.moe = il >= c.n_dense
        E, H = c.n_embd, c.n_head
        P = lambda *s: nn.Parameter(torch.empty(*s))  # noqa: E731
        self.attn_norm = nn.Parameter(torch.ones(E))
        self.attn_q_a = P(c.n_lora_q, E)
        self.attn_q_a_norm = nn.Parameter(torch.ones(c.n_lora_q))
        self.attn_q_b = P(H * c.n_qk, c.n_lora_q)
        self.attn_kv_a_mqa = P(c.n_lora_kv + c.n_rope, E)
        self.attn_kv_a_norm = nn.Parameter(torch.ones(c.n_lora_kv))
        self.attn_k_b = P(H, c.n_lora_kv, c.n_nope)  # ne {nope, kv_lora, H}
        self.attn_v_b = P(H, c.n_v, c.n_lora_kv)  # ne {kv_lora, v, H}
        self.attn_output = P(E, H * c.n_v)
        self.ffn_norm = nn.Parameter(torch.ones(E))
        if not self.moe:
            self.ffn_gate = P(c.n_ff, E)
            self.ffn_up = P(c.n_ff, E)
            self.ffn_down = P(E, c.n_ff)
        else:
            X, Fe = c.n_expert, c.n_ff_exp
            Fs = Fe * c.n_expert_shared
            self.ffn_gate_inp = P(X, E)
            # Selection bias (HF e_score_correction_bias): not trained by the
            # optimizer; updated aux-loss-free from the expert loads.
            self.register_buffer("exp_probs_b", torch.zeros(X))
            self.register_buffer("load", torch.zeros(X), persistent=False)
            self.ffn_gate_exps = P(X, Fe, E)
            self.ffn_up_exps = P(X, Fe, E)
            self.ffn_down_exps = P(X, E, Fe)
            self.ffn_gate_shexp = P(Fs, E)
            self.ffn_up_shexp = P(Fs, E)
            self.ffn_down_shexp = P(E, Fs)

    def attention(self, x, cos, sin):
        c = self.c
        B, T, _ = x.shape
        H = c.n_head
        h = rms(x, self.attn_norm, c.eps)
        qa = rms(F.linear(h, self.attn_q_a), self.attn_q_a_norm, c.eps)
        q = F.linear(qa, self.attn_q_b).view(B, T, H, c.n_qk)
        q_nope, q_pe = q[..., :c.n_nope], q[..., c.n_nope:]
        ckv = F.linear(h, self.attn_kv_a_mqa)
        lat = rms(ckv[..., :c.n_lora_kv], self.attn_kv_a_norm, c.eps)
        k_pe = rope(ckv[..., c.n_lora_kv:], cos, sin)  # [B,T,r]
        q_pe = rope(q_pe, cos[:, None], sin[:, None])  # [B,T,H,r]
        k_nope = torch.einsum("btj,hjd->bthd", lat, self.attn_k_b)
        v = torch.einsum("btj,hej->bthe", lat, self.attn_v_b)
        dt = v.dtype
        qf = torch.cat([q_nope.to(dt), q_pe.to(dt)], -1).transpose(1, 2)
        kf = torch.cat([k_nope, k_pe.to(dt)[:, :, None, :].expand(B, T, H, c.n_rope)], -1).transpose(1, 2)
        o = attend(qf, kf, v.transpose(1, 2), 1.0 / math.sqrt(c.n_qk))
        return F.linear(o.transpose(1, 2).reshape(B, T, H * c.n_v), self.attn_output)

    def route(self, h2):
        """glmw reference route(): sigmoid, bias only for choosing, top-k,
        renormalise (floor 6.1e-5), ×scale. Router in f32."""
        c = self.c
        with torch.autocast(device_type=h2.device.type, enabled=False):
            logits = F.linear(h2.float(), self.ffn_gate_inp.float())
        s = torch.sigmoid(logits)
        sel = torch.topk(s.detach() + self.exp_probs_b, c.n_expert_used, dim=-1).indices
        w = s.gather(-1, sel)
        if c.expert_weights_norm:
            w = w / w.sum(-1, keepdim=True).clamp_min(6.103515625e-5)
        w = w * c.expert_weights_scale
        if self.training:
            self.load += F.one_hot(sel.flatten(), c.n_expert).sum(0).float()
        return torch.zeros_like(s).scatter(-1, sel, w)  # [N, X], zero for unchosen experts

    def ffn(self, x):
        c = self.c
        h2 = rms(x, self.ffn_norm, c.eps)
        if not self.moe:
            return F.linear(F.silu(F.linear(h2, self.ffn_gate)) * F.linear(h2, self.ffn_up), self.ffn_down)
        B, T, E = h2.shape
        hf = h2.reshape(B * T, E)
        comb = self.route(hf)
        # Every expert on every token, weighted by comb (zero off the top-k):
        # the same sum as running only the chosen ones, and fast at this size.
        g = torch.einsum("nd,xfd->xnf", hf, self.ffn_gate_exps)
        u = torch.einsum("nd,xfd->xnf", hf, self.ffn_up_exps)
        y = torch.einsum("xnf,xdf->xnd", F.silu(g) * u, self.ffn_down_exps)
        moe = torch.einsum("nx,xnd->nd", comb.to(y.dtype), y)
        sh = F.linear(F.silu(F.linear(hf, self.ffn_gate_shexp)) * F.linear(hf, self.ffn_up_shexp),
                      self.ffn_down_shexp)
        return (moe.float() + sh.float()).view(B, T, E)

    def forward(self, x, cos, sin, p_drop=0.0):
        # Dropout is a training-time regulariser only (identity in eval and
        # absent from the exported graph).
        x = x + F.dropout(self.attention(x, cos, sin).float(), p_drop, self.training)
        return x + F.dropout(self.ffn(x).float(), p_drop, self.training)


class Model(nn.Module):
    def __init__(self, c, dropout=0.0):
        super().__init__()
        self.c = c
        self.dropout = dropout
        self.token_embd = nn.Parameter(torch.empty(c.n_vocab, c.n_embd))
        self.blocks = nn.ModuleList(Block(c, il) for il in range(c.n_layer))
        self.output_norm = nn.Parameter(torch.ones(c.n_embd))
        self.output = nn.Parameter(torch.empty(c.n_vocab, c.n_embd))
        self.rope_cache = None

    def init_weights(self):
        std = 0.02
        out_std = std / math.sqrt(2 * self.c.n_layer)
        for name, p in self.named_parameters():
            if p.dim() == 1:
                continue  # norm gains stay 1
            last = name.rsplit(".", 1)[-1]
            s = out_std if last in ("attn_output", "ffn_down", "ffn_down_exps", "ffn_down_shexp") else std
            nn.init.normal_(p, 0.0, s)

    def forward(self, ids):
        T = ids.shape[1]
        if self.rope_cache is None or self.rope_cache[0].shape[0] < T or self.rope_cache[0].device != ids.device:
            self.rope_cache = rope_tables(self.c, max(T, self.c.n_ctx), ids.device)
        cos, sin = (t[:T] for t in self.rope_cache)
        x = F.dropout(F.embedding(ids, self.token_embd).float(), self.dropout, self.training)
        for b in self.blocks:
            x = b(x, cos, sin, self.dropout)
        return F.linear(rms(x, self.output_norm, self.c.eps), self.output)

    @staticmethod
    def from_gguf(path, device="cpu"):
        """A model holding a GGUF file's weights (dequantized to f32)."""
        md, tensors, _ = gw.read_gguf(path)
        model = Model(Cfg.from_gguf(md)).to(device)
        load_dequantized(model, tensors)
        return model.eval(), md

    def gguf_tensors(self):
        """[(gguf name, numpy array, kind)] in the order the real files use;
        kind picks the type in the Q4_0 mix."""
        out = [("token_embd.weight", self.token_embd, "q4")]
        for il, b in enumerate(self.blocks):
            n = lambda s: f"blk.{il}.{s}.weight"  # noqa: E731
            out += [(n("attn_norm"), b.attn_norm, "f32"), (n("attn_q_a"), b.attn_q_a, "q4"),
                    (n("attn_q_a_norm"), b.attn_q_a_norm, "f32"), (n("attn_q_b"), b.attn_q_b, "q4"),
                    (n("attn_kv_a_mqa"), b.attn_kv_a_mqa, "q8"), (n("attn_kv_a_norm"), b.attn_kv_a_norm, "f32"),
                    (n("attn_k_b"), b.attn_k_b, "q8"), (n("attn_v_b"), b.attn_v_b, "q8"),
                    (n("attn_output"), b.attn_output, "q4"), (n("ffn_norm"), b.ffn_norm, "f32")]
            if not b.moe:
                out += [(n("ffn_gate"), b.ffn_gate, "q4"), (n("ffn_up"), b.ffn_up, "q4"),
                        (n("ffn_down"), b.ffn_down, "q4")]
            else:
                out += [(n("ffn_gate_inp"), b.ffn_gate_inp, "f32"),
                        (f"blk.{il}.exp_probs_b.bias", b.exp_probs_b, "f32"),
                        (n("ffn_gate_exps"), b.ffn_gate_exps, "q4"), (n("ffn_up_exps"), b.ffn_up_exps, "q4"),
                        (n("ffn_down_exps"), b.ffn_down_exps, "q4"),
                        (n("ffn_gate_shexp"), b.ffn_gate_shexp, "q8"), (n("ffn_up_shexp"), b.ffn_up_shexp, "q8"),
                        (n("ffn_down_shexp"), b.ffn_down_shexp, "q8")]
        out += [("output_norm.weight", self.output_norm, "f32"), ("output.weight", self.output, "q8")]
        return out


# ------------------------------------------------------------------ data

def load_data(data_dir):
    from tokenizers import Tokenizer
    tj = os.path.join(data_dir, "tokenizer.json")
    tok = Tokenizer.from_file(tj)
    texts = {}
    for split in ("train", "test"):
        with open(os.path.join(data_dir, f"kjv-{split}.txt"), encoding="utf-8") as f:
            texts[split] = f.read()
    # glmw perplexity encodes without special-token parsing; the text has none.
    ids = {k: np.array(tok.encode(v, add_special_tokens=False).ids, dtype=np.int64) for k, v in texts.items()}
    return tok, tj, ids


# ------------------------------------------------------------------ eval

@torch.no_grad()
def perplexity(model, ids, n_ctx, device, batch=16):
    """glmw perplexity / llama-perplexity: windows of n_ctx tokens (no BOS:
    the file sets add_bos_token false), each from an empty cache; positions
    j in [n_ctx/2, n_ctx-1) predict token j+1. f32, no autocast."""
    was = model.training
    model.eval()
    n_chunks = len(ids) // n_ctx
    win = torch.from_numpy(ids[: n_chunks * n_ctx].reshape(n_chunks, n_ctx)).to(device)
    nll = []
    for i in range(0, n_chunks, batch):
        w = win[i:i + batch]
        logits = model(w[:, :-1]).float()
        lp = torch.log_softmax(logits.double(), -1)
        tgt = w[:, 1:]
        v = -lp.gather(-1, tgt[..., None])[..., 0]  # v[:, j] = nll of token j+1
        nll.append(v[:, n_ctx // 2:].flatten())
    nll = torch.cat(nll).double()
    model.train(was)
    mean = nll.mean().item()
    var = max((nll.pow(2).mean() - nll.mean() ** 2).item(), 0.0)
    ppl = math.exp(mean)
    return {"ppl": ppl, "ppl_err": ppl * math.sqrt(var / max(len(nll) - 1, 1)), "n_ctx": n_ctx,
            "n_chunks": n_chunks, "tokens_scored": len(nll)}


def unigram_ppl(train_ids, test_ids, n_vocab, n_ctx):
    """Add-one unigram model from the training split, scored on the same
    test tokens as perplexity()."""
    counts = np.bincount(train_ids, minlength=n_vocab).astype(np.float64) + 1.0
    lp = np.log(counts / counts.sum())
    n_chunks = len(test_ids) // n_ctx
    w = test_ids[: n_chunks * n_ctx].reshape(n_chunks, n_ctx)
    scored = w[:, n_ctx // 2 + 1:]
    return float(np.exp(-lp[scored].mean()))


@torch.no_grad()
def greedy(model, prompt_ids, n, device):
    model.eval()
    ids = list(prompt_ids)
    for _ in range(n):
        logits = model(torch.tensor([ids], device=device))[0, -1]
        ids.append(int(logits.argmax()))
    return ids[len(prompt_ids):]


# ------------------------------------------------------------------ export

def metadata(c, tokenizer_json, file_type, name):
    a = lambda k: f"deepseek2.{k}"  # noqa: E731
    m = [("general.architecture", "str", "deepseek2"), ("general.type", "str", "model"),
         ("general.name", "str", name), ("general.license", "str", "mit"),
         ("general.quantization_version", "u32", 2), ("general.file_type", "u32", file_type),
         (a("block_count"), "u32", c.n_layer), (a("context_length"), "u32", c.n_ctx),
         (a("embedding_length"), "u32", c.n_embd), (a("feed_forward_length"), "u32", c.n_ff),
         (a("attention.head_count"), "u32", c.n_head), (a("attention.head_count_kv"), "u32", 1),
         (a("rope.freq_base"), "f32", c.rope_base), (a("attention.layer_norm_rms_epsilon"), "f32", c.eps),
         (a("expert_used_count"), "u32", c.n_expert_used), (a("expert_group_count"), "u32", 1),
         (a("expert_group_used_count"), "u32", 1), (a("leading_dense_block_count"), "u32", c.n_dense),
         (a("vocab_size"), "u32", c.n_vocab), (a("attention.q_lora_rank"), "u32", c.n_lora_q),
         (a("attention.kv_lora_rank"), "u32", c.n_lora_kv),
         (a("attention.key_length"), "u32", c.n_lora_kv + c.n_rope),
         (a("attention.value_length"), "u32", c.n_lora_kv),
         (a("attention.key_length_mla"), "u32", c.n_qk), (a("attention.value_length_mla"), "u32", c.n_v),
         (a("expert_feed_forward_length"), "u32", c.n_ff_exp), (a("expert_count"), "u32", c.n_expert),
         (a("expert_shared_count"), "u32", c.n_expert_shared),
         (a("expert_weights_scale"), "f32", c.expert_weights_scale),
         (a("expert_weights_norm"), "bool", c.expert_weights_norm),
         # The real file has no gating key (llama.cpp/glmw infer sigmoid from
         # 47 layers + 154880 vocab); a small model must say so: 2 = sigmoid.
         (a("expert_gating_func"), "u32", 2),
         (a("rope.dimension_count"), "u32", c.n_rope)]
    return m + tk.gguf_metadata(tokenizer_json)


def export(model, tokenizer_json, out_dir, kind):
    """Write OUT/glmw-tiny-{f32,q4_0}.gguf; returns {param: dequantized array}
    for the tensors as written (to evaluate the exact file in torch)."""
    c = model.c
    types = {"f32": gw.F32, "q4": gw.Q4_0, "q8": gw.Q8_0}
    tensors, params = [], {}
    for name, p, k in model.gguf_tensors():
        arr = p.detach().float().cpu().numpy()
        ty = gw.F32 if kind == "f32" else types[k]
        tensors.append((name, arr, ty))
        params[name] = (p, ty, arr.shape)
    fname = f"glmw-tiny-{'f32' if kind == 'f32' else 'q4_0'}.gguf"
    path = os.path.join(out_dir, fname)
    md = metadata(c, tokenizer_json, 0 if kind == "f32" else 2,
                  "glmw tiny KJV (GLM-4.7-Flash architecture)")
    raws = gw.write_gguf(path, md, tensors)
    deq = {name: gw.decode(raws[name], ty, shape) for name, (p, ty, shape) in params.items()}
    return path, deq, {name: gw.TYPE_NAME[ty] for name, (_, ty, _) in params.items()}


@torch.no_grad()
def load_dequantized(model, deq):
    for name, p, _ in model.gguf_tensors():
        p.copy_(torch.from_numpy(deq[name]).to(p.device, p.dtype))


# ------------------------------------------------------------------ train

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=64, help="sequences per step")
    ap.add_argument("--ctx", type=int, default=512, help="training sequence length (= context_length)")
    ap.add_argument("--eval-ctx", type=int, default=256, help="--ctx of the perplexity numbers")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--dropout", type=float, default=0.3, help="residual/embedding dropout while training")
    ap.add_argument("--bias-update", type=float, default=1e-3,
                    help="aux-loss-free selection-bias step (DeepSeek-V3); 0 keeps the bias at zero")
    ap.add_argument("--prefix-prob", type=float, default=0.5,
                    help="share of training sequences that start with [gMASK]<sop> (glmw generate's prefix)")
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--max-seconds", type=float, default=270.0, help="stop training early past this")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    a = ap.parse_args()

    os.makedirs(a.out, exist_ok=True)
    logf = open(os.path.join(a.out, "train.log"), "w")

    def log(*args):
        s = " ".join(str(x) for x in args)
        print(s, flush=True)
        logf.write(s + "\n")
        logf.flush()

    torch.set_num_threads(a.threads)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)
    dev = torch.device(a.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # f32 evaluation must be f32
        torch.backends.cudnn.allow_tf32 = False
    t0 = time.time()
    tok, tj, ids = load_data(a.data)
    tokens, _, _, sp = tk.gguf_vocab(tj)
    c = Cfg(n_vocab=len(tokens), n_ctx=a.ctx)
    log(f"data: train {len(ids['train'])} tokens, test {len(ids['test'])} tokens, vocab {c.n_vocab}; "
        f"{time.time() - t0:.1f}s")
    model = Model(c, a.dropout).to(dev)
    model.init_weights()
    n_params = sum(p.numel() for p in model.parameters())
    log(f"config {asdict(c)}; {n_params} parameters; device {dev}"
        + (f" ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else ""))

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=dev.type == "cuda")

    def lr_at(step):
        if step < a.warmup:
            return a.lr * (step + 1) / a.warmup
        p = (step - a.warmup) / max(1, a.steps - a.warmup)
        return a.lr * (a.min_lr_frac + (1 - a.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(p, 1.0))))

    train = torch.from_numpy(ids["train"]).to(dev)
    gen = torch.Generator(device=dev)
    gen.manual_seed(a.seed)
    ar = torch.arange(a.ctx + 1, device=dev)
    use_amp = dev.type == "cuda"
    moe_blocks = [b for b in model.blocks if b.moe]
    lossf = open(os.path.join(a.out, "loss.tsv"), "w")
    lossf.write("step\ttrain_loss\ttest_ppl\tlr\tseconds\n")
    t_train = time.time()
    model.train()
    step = 0
    for step in range(a.steps):
        off = torch.randint(0, len(train) - a.ctx - 1, (a.batch,), device=dev, generator=gen)
        seq = train[off[:, None] + ar]
        pre = torch.rand(a.batch, device=dev, generator=gen) < a.prefix_prob
        seq[pre, 0] = sp["bos"]  # [gMASK]
        seq[pre, 1] = sp["sop"]
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=use_amp):
            logits = model(seq[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, c.n_vocab), seq[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            for b in moe_blocks:
                if a.bias_update > 0:
                    b.exp_probs_b += a.bias_update * torch.sign(b.load.mean() - b.load)
                b.load.zero_()
        last = step == a.steps - 1 or time.time() - t_train > a.max_seconds
        if step % 25 == 0 or last or (step + 1) % a.eval_every == 0:
            test = ""
            if (step + 1) % a.eval_every == 0 or last:
                test = f"{perplexity(model, ids['test'], a.eval_ctx, dev)['ppl']:.4f}"
            el = time.time() - t_train
            lv = loss.item()
            lossf.write(f"{step}\t{lv:.5f}\t{test}\t{lr_at(step):.6g}\t{el:.1f}\n")
            lossf.flush()
            log(f"step {step:5d} loss {lv:.4f} lr {lr_at(step):.2e} {el:6.1f}s" + (f" test ppl {test}" if test else ""))
        if last:
            break
    steps_done = step + 1
    train_s = time.time() - t_train
    log(f"trained {steps_done} steps in {train_s:.1f}s")

    # ---- export and evaluate exactly what was written
    ppl = {}
    model.eval()
    for kind in ("f32", "q4_0"):
        path, deq, types = export(model, tj, a.out, kind)
        state = {k: v.clone() for k, v in model.state_dict().items()}
        load_dequantized(model, deq)
        r = perplexity(model, ids["test"], a.eval_ctx, dev)
        r["file"] = os.path.basename(path)
        r["bytes"] = os.path.getsize(path)
        r["types"] = {t: sum(1 for v in types.values() if v == t) for t in sorted(set(types.values()))}
        prompt = "And God said"
        p_ids = [sp["bos"], sp["sop"]] + tok.encode(prompt, add_special_tokens=False).ids
        g_ids = greedy(model, p_ids, 32, dev)
        r["greedy"] = {"prompt": prompt, "prompt_ids": p_ids, "ids": g_ids, "text": tok.decode(g_ids)}
        model.load_state_dict(state)
        ppl[kind] = r
        log(f"{kind}: {r['file']} {r['bytes']} bytes, held-out ppl {r['ppl']:.4f} +/- {r['ppl_err']:.4f} "
            f"(ctx {a.eval_ctx}, {r['n_chunks']} windows, {r['tokens_scored']} tokens); "
            f"greedy {prompt!r} -> {r['greedy']['text']!r}")
    uni = unigram_ppl(ids["train"], ids["test"], c.n_vocab, a.eval_ctx)
    log(f"unigram ppl (train counts, add-one) on the same tokens: {uni:.2f}")
    summary = {"ppl_f32": ppl["f32"]["ppl"], "ppl_q4_0": ppl["q4_0"]["ppl"], "unigram_ppl": uni,
               "eval": {"file": "tools/data/kjv-test.txt", "ctx": a.eval_ctx, "add_bos": False,
                        "method": "glmw perplexity: windows of ctx tokens, second half scored"},
               "f32": ppl["f32"], "q4_0": ppl["q4_0"], "config": asdict(c), "n_params": n_params,
               "train": {"seed": a.seed, "steps": steps_done, "steps_planned": a.steps, "batch": a.batch,
                         "ctx": a.ctx, "lr": a.lr, "warmup": a.warmup, "wd": a.wd, "dropout": a.dropout,
                         "bias_update": a.bias_update, "prefix_prob": a.prefix_prob,
                         "device": str(dev) + (f" ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else ""),
                         "seconds": round(train_s, 1), "torch": torch.__version__,
                         "train_tokens": int(len(ids["train"])), "test_tokens": int(len(ids["test"]))},
               "exp_probs_b": {f"blk.{il}": b.exp_probs_b.tolist() for il, b in enumerate(model.blocks) if b.moe},
               "argv": sys.argv[1:], "total_seconds": round(time.time() - t0, 1)}
    with open(os.path.join(a.out, "ppl.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    log(f"done in {time.time() - t0:.1f}s: ppl f32 {summary['ppl_f32']:.4f}, q4_0 mix {summary['ppl_q4_0']:.4f}, "
        f"unigram {uni:.2f}")


if __name__ == "__main__":
    main()
