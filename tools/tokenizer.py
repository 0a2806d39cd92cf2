#!/usr/bin/env python3
"""Byte-level BPE for the tiny model, trained with the `tokenizers` package on
the training split, laid out like GLM's vocabulary and exported into GGUF
metadata the way glmw (src/tokenizer) and llama.cpp read it.

    python3 tools/tokenizer.py [--data tools/data] [--vocab 2048]

writes DATA/tokenizer.json (a `tokenizers` file: load it with
tokenizers.Tokenizer.from_file).

Layout (as GLM): ids 0..N-37 are BPE tokens (the 256 byte symbols first),
ids N-36..N-1 GLM's 36 added tokens in GLM's order, all CONTROL, so
<|endoftext|> = N-36 is eos/eog, [gMASK] = N-34 is bos, <|user|> = N-29 eot,
<|observation|> = N-27 eom (model-spec §5.2 and src/synth/presets.rs).

Pre-tokenization must equal glmw's for tokenizer.ggml.pre = "glm4"
(src/tokenizer/pre.rs): one Split with llama.cpp's llama3/CHATGLM4 regex,
matches isolated, then ByteLevel without prefix space and without its own
regex; BPE with ignore_merges = true. The HF side is built from the same
pieces, so `glmw tokenize` and this file give the same ids.
"""

import argparse
import json
import os

# glmw src/tokenizer/pre.rs LLAMA3 (= llama.cpp LLAMA_VOCAB_PRE_TYPE_CHATGLM4).
GLM4_REGEX = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|"
              r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# GLM-4.x added tokens in id order (glmw src/synth/vocab.rs GLM_SPECIALS).
GLM_SPECIALS = [
    "<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>",
    "<|assistant|>", "<|observation|>", "<|begin_of_image|>", "<|end_of_image|>",
    "<|begin_of_video|>", "<|end_of_video|>", "<|begin_of_audio|>", "<|end_of_audio|>",
    "<|begin_of_transcription|>", "<|end_of_transcription|>", "<|code_prefix|>",
    "<|code_middle|>", "<|code_suffix|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
    "<tool_response>", "</tool_response>", "<arg_key>", "</arg_key>", "<arg_value>",
    "</arg_value>", "/nothink", "<|begin_of_box|>", "<|end_of_box|>", "<|image|>", "<|video|>",
]

# A stand-in: glmw renders chats with the file's template, and the shipped
# tools/model/glmw-tiny-q4_0.gguf carries glmw's GLM_TEMPLATE
# (src/tokenizer/template.rs) instead; copy that text here before exporting
# a new built-in model.
CHAT_TEMPLATE = ("[gMASK]<sop>{%- for m in messages -%}<|{{ m.role }}|>{{ m.content }}{%- endfor -%}"
                 "{%- if add_generation_prompt -%}<|assistant|><think>{%- endif -%}")

# llama.cpp token types
NORMAL, CONTROL = 1, 3


def build_empty():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(GLM4_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    return tok


def train(train_file, n_vocab):
    from tokenizers import Tokenizer, pre_tokenizers, trainers
    tok = build_empty()
    trainer = trainers.BpeTrainer(
        vocab_size=n_vocab - len(GLM_SPECIALS), min_frequency=2, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train([train_file], trainer)
    tok.add_special_tokens(GLM_SPECIALS)
    # The trainer may not carry ignore_merges over to the trained model: set
    # it in the serialized form and reload, so the file says it explicitly.
    doc = json.loads(tok.to_str())
    doc["model"]["ignore_merges"] = True
    tok = Tokenizer.from_str(json.dumps(doc))
    if tok.get_vocab_size() != n_vocab:
        raise SystemExit(f"tokenizer.py: got {tok.get_vocab_size()} tokens, wanted {n_vocab}")
    return tok


def gguf_vocab(tokenizer_json):
    """(tokens by id, token types, merges as "a b", special ids) from a
    tokenizer.json, read with the json module only."""
    with open(tokenizer_json, encoding="utf-8") as f:
        doc = json.load(f)
    m = doc["model"]
    assert m["type"] == "BPE" and m.get("ignore_merges") is True, "expected a BPE with ignore_merges"
    by_id = {i: s for s, i in m["vocab"].items()}
    types = {i: NORMAL for i in by_id}
    for t in doc.get("added_tokens", []):
        by_id[t["id"]] = t["content"]
        types[t["id"]] = CONTROL
    n = len(by_id)
    assert sorted(by_id) == list(range(n)), "token ids are not 0..n-1"
    tokens = [by_id[i] for i in range(n)]
    merges = [" ".join(x) if isinstance(x, list) else x for x in m["merges"]]
    ids = {s: tokens.index(s) for s in GLM_SPECIALS}
    special = {"eos": ids["<|endoftext|>"], "pad": ids["<|endoftext|>"], "unk": ids["<|endoftext|>"],
               "bos": ids["[gMASK]"], "eot": ids["<|user|>"], "eom": ids["<|observation|>"],
               "sop": ids["<sop>"]}
    return tokens, [types[i] for i in range(n)], merges, special


def gguf_metadata(tokenizer_json):
    """The tokenizer.* GGUF keys, as (key, type, value) for tools/gguf_io.py."""
    tokens, types, merges, sp = gguf_vocab(tokenizer_json)
    return [
        ("tokenizer.ggml.model", "str", "gpt2"),
        ("tokenizer.ggml.pre", "str", "glm4"),
        ("tokenizer.ggml.tokens", "arr_str", tokens),
        ("tokenizer.ggml.token_type", "arr_i32", types),
        ("tokenizer.ggml.merges", "arr_str", merges),
        ("tokenizer.ggml.eos_token_id", "u32", sp["eos"]),
        ("tokenizer.ggml.padding_token_id", "u32", sp["pad"]),
        ("tokenizer.ggml.bos_token_id", "u32", sp["bos"]),
        ("tokenizer.ggml.eot_token_id", "u32", sp["eot"]),
        ("tokenizer.ggml.unknown_token_id", "u32", sp["unk"]),
        ("tokenizer.ggml.eom_token_id", "u32", sp["eom"]),
        # GLM adds no BOS (the [gMASK]<sop> prefix comes from the template or
        # glmw generate), so glmw/llama perplexity windows start with text.
        ("tokenizer.ggml.add_bos_token", "bool", False),
        ("tokenizer.chat_template", "str", CHAT_TEMPLATE),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--data", default=os.path.join(here, "data"))
    ap.add_argument("--vocab", type=int, default=2048, help="total vocabulary incl. the 36 specials")
    a = ap.parse_args()
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    tok = train(os.path.join(a.data, "kjv-train.txt"), a.vocab)
    out = os.path.join(a.data, "tokenizer.json")
    tok.save(out)
    tokens, _, merges, sp = gguf_vocab(out)
    sample = "And God said, Let there be light: and there was light."
    enc = tok.encode(sample)
    print(f"{out}: {len(tokens)} tokens, {len(merges)} merges, specials {sp}")
    print(f"{sample!r} -> {enc.tokens}")
    for name in ("kjv-train.txt", "kjv-test.txt"):
        with open(os.path.join(a.data, name), encoding="utf-8") as f:
            text = f.read()
        n = len(tok.encode(text).ids)
        print(f"{name}: {len(text)} chars, {n} tokens, {len(text) / n:.2f} chars/token")


if __name__ == "__main__":
    main()
