#!/usr/bin/env python3
"""Check a GGUF written by tools/train.py against glmw: same token ids, same
logits, same perplexity, same greedy text. The PyTorch side is rebuilt from
the GGUF file alone (tools/gguf_io.py reader, tools/train.py model).

    python3 tools/verify.py MODEL.gguf [--glmw target/release/glmw] [--ctx 256]
                            [--skip-ppl] [--generate BACKEND]

--generate runs `glmw generate --temp 0` (GPU only; `auto` picks one, e.g.
lavapipe) and compares with torch's greedy continuation. Exit status 1 when
a check fails: token ids differ, perplexity differs by more than --tol
(relative, default 1e-4), or logits by more than 1e-3 relative L2.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train as tr  # noqa: E402

SAMPLES = [
    "And God said, Let there be light: and there was light.",
    "In the beginning was the Word, and the Word was with God, and the Word was God.",
    "  Leading spaces,\ttabs\r\nand CRLF; numbers 1234567 and 3:16; it's they're we'll I'd.\n\n\n",
    "Ünïcödé — “quotes” and emoji 🦀 and 中文 fall back to bytes.",
    "</think> <|user|> [gMASK] are plain text here",
]
WITH_SPECIAL = "[gMASK]<sop><|user|>Who begat Enos?<|assistant|><think>"


def hf_from_gguf(md):
    """A `tokenizers` tokenizer made from the GGUF's own vocab and merges,
    with glmw's glm4 pre-tokenizer, so the check covers what was exported."""
    from tokenizers import Tokenizer, decoders, models

    import tokenizer as tk
    toks, types = md["tokenizer.ggml.tokens"], md["tokenizer.ggml.token_type"]
    vocab = {t: i for i, (t, ty) in enumerate(zip(toks, types)) if ty == tk.NORMAL}
    merges = [tuple(m.split(" ", 1)) for m in md["tokenizer.ggml.merges"]]
    t = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=True))
    t.pre_tokenizer = tk.build_empty().pre_tokenizer
    t.decoder = decoders.ByteLevel()
    specials = [s for s, ty in zip(toks, types) if ty == tk.CONTROL]
    t.add_special_tokens(specials)
    assert all(t.token_to_id(s) == toks.index(s) for s in specials)
    return t


def encode_plain(hf, s):
    """HF encoding with special-token text left as text (glmw's
    parse_special = false, used by perplexity): pre-tokenize, then BPE."""
    return [t.id for p, _ in hf.pre_tokenizer.pre_tokenize_str(s) for t in hf.model.tokenize(p)]


def glmw(exe, *args):
    r = subprocess.run([exe, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"glmw {' '.join(args[:1])} failed: {r.stderr.strip()}")
    return r.stdout


def chunks(text, size=30000):
    out, cur = [], ""
    for line in text.splitlines(keepends=True):
        if len(cur) + len(line) > size and cur:
            out.append(cur)
            cur = ""
        cur += line
    return out + ([cur] if cur else [])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--glmw", default=os.path.join(HERE, "..", "target", "release", "glmw"))
    ap.add_argument("--text", default=os.path.join(HERE, "data", "kjv-test.txt"))
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--skip-ppl", action="store_true")
    ap.add_argument("--generate", metavar="BACKEND")
    a = ap.parse_args()
    torch.set_num_threads(1)
    ok = True
    model, md = tr.Model.from_gguf(a.model)
    hf = hf_from_gguf(md)
    with open(a.text, encoding="utf-8") as f:
        text = f.read()

    # 1. token ids: plain text (perplexity's encoding) and with specials
    n_tok, bad = 0, []
    for s in SAMPLES + chunks(text):
        g = json.loads(glmw(a.glmw, "tokenize", "-m", a.model, "--no-special", "--json", s))["ids"]
        # glmw without special parsing == HF with the added tokens not split out
        h = encode_plain(hf, s)
        n_tok += len(g)
        if g != h:
            bad.append(s[:60])
    g = json.loads(glmw(a.glmw, "tokenize", "-m", a.model, "--json", WITH_SPECIAL))["ids"]
    h = hf.encode(WITH_SPECIAL, add_special_tokens=False).ids
    if g != h:
        bad.append(WITH_SPECIAL)
    plain_hf = encode_plain(hf, text)
    print(f"tokenize: {len(SAMPLES) + len(chunks(text)) + 1} texts, {n_tok} tokens: "
          + ("identical" if not bad else f"DIFFERENT for {bad}"))
    ok &= not bad

    # 2. logits of every position for the first 64 test tokens (CPU reference)
    ids = plain_hf[:64]
    with tempfile.TemporaryDirectory() as td:
        out = os.path.join(td, "logits.f32")
        glmw(a.glmw, "logits", "-m", a.model, "--tokens", ",".join(map(str, ids)), "--all", "--out", out,
             "--backend", "cpu")
        g = np.fromfile(out, dtype="<f4").reshape(len(ids), -1)
    with torch.no_grad():
        t = model(torch.tensor([ids]))[0].numpy()
    rel = float(np.linalg.norm(g - t) / np.linalg.norm(t))
    agree = float((g.argmax(-1) == t.argmax(-1)).mean())
    print(f"logits: {len(ids)} positions, relative L2 {rel:.2e}, max abs {np.abs(g - t).max():.2e}, "
          f"argmax agreement {agree:.3f}")
    ok &= rel < 1e-3

    # 3. perplexity, glmw's CPU reference vs torch on the same file
    if not a.skip_ppl:
        r = json.loads(glmw(a.glmw, "perplexity", "-m", a.model, "-f", a.text, "--ctx", str(a.ctx),
                            "--backend", "cpu", "--json"))
        p = tr.perplexity(model, np.array(plain_hf, dtype=np.int64), a.ctx, torch.device("cpu"))
        d = abs(r["ppl"] / p["ppl"] - 1)
        print(f"perplexity (ctx {a.ctx}, {p['n_chunks']} windows): glmw cpu {r['ppl']:.6f}, "
              f"torch {p['ppl']:.6f}, relative difference {d:.2e}")
        ok &= d < a.tol and r["tokens_scored"] == p["tokens_scored"]

    # 4. greedy continuation on a GPU backend
    if a.generate:
        prompt = "And God said"
        r = json.loads(glmw(a.glmw, "generate", "-m", a.model, "-p", prompt, "--temp", "0", "-n", "32",
                            "--backend", a.generate, "--json"))
        sp = [hf.token_to_id("[gMASK]"), hf.token_to_id("<sop>")]
        want = tr.greedy(model, sp + hf.encode(prompt, add_special_tokens=False).ids, 32, torch.device("cpu"))
        got = r.get("ids") or r.get("tokens") or r.get("token_ids")
        same = got is not None and list(got)[-len(want):] == want
        print(f"generate ({a.generate}): glmw {r.get('text')!r}\n          torch {hf.decode(want)!r}: "
              + ("identical" if same else "differ"))
    print("OK" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
