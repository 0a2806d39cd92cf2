//! Cross-check against gguf-py (PyPI `gguf`), an implementation independent
//! of glmw: tests/gguf_py/make_fixture.py writes a GGUF file with every
//! metadata value type and one tensor per ggml type, plus gguf-py's own
//! dequantization of each tensor. glmw must read back the same metadata,
//! dequantize to the same f32 bits, and (for the types it claims byte-exact
//! quantization for) quantize gguf-py's inputs to the same bytes.
//!
//! Tolerance: none. Every comparison is bit-for-bit; gguf-py computes in the
//! same f32 operation order as ggml and glmw, and neither fuses multiply-adds.
//!
//! Needs python3 with the `gguf` package (`pip install gguf`); without it the
//! test fails rather than silently passing. `PYTHON` overrides the
//! interpreter.

use std::path::{Path, PathBuf};
use std::process::Command;

use glmw::gguf::{GgufFile, Value, ValueType};
use glmw::quant::{dequantize_vec, quantize_into, GgmlType};

// ------------------------------------------------------------ minimal JSON

#[derive(Debug)]
enum Json {
    Bool(bool),
    /// Kept as text so 64-bit integers and float reprs parse exactly.
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    fn get(&self, key: &str) -> &Json {
        match self {
            Json::Obj(kv) => kv
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v)
                .unwrap_or_else(|| panic!("no {key:?} in {self:?}")),
            _ => panic!("not an object: {self:?}"),
        }
    }
    fn str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            _ => panic!("not a string: {self:?}"),
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) {
        self.ws();
        assert_eq!(
            self.s.get(self.i),
            Some(&c),
            "JSON: expected {:?} at {}",
            c as char,
            self.i
        );
        self.i += 1;
    }
    fn peek(&mut self) -> u8 {
        self.ws();
        self.s[self.i]
    }
    fn value(&mut self) -> Json {
        match self.peek() {
            b'{' => {
                self.eat(b'{');
                let mut kv = Vec::new();
                while self.peek() != b'}' {
                    if !kv.is_empty() {
                        self.eat(b',');
                    }
                    let k = self.string();
                    self.eat(b':');
                    kv.push((k, self.value()));
                }
                self.eat(b'}');
                Json::Obj(kv)
            }
            b'[' => {
                self.eat(b'[');
                let mut items = Vec::new();
                while self.peek() != b']' {
                    if !items.is_empty() {
                        self.eat(b',');
                    }
                    items.push(self.value());
                }
                self.eat(b']');
                Json::Arr(items)
            }
            b'"' => Json::Str(self.string()),
            b't' | b'f' => {
                let t = self.s[self.i..].starts_with(b"true");
                self.i += if t { 4 } else { 5 };
                Json::Bool(t)
            }
            _ => {
                let start = self.i;
                while self.i < self.s.len() && b"+-.eE0123456789".contains(&self.s[self.i]) {
                    self.i += 1;
                }
                assert!(self.i > start, "JSON: unexpected byte at {start}");
                Json::Num(String::from_utf8(self.s[start..self.i].to_vec()).unwrap())
            }
        }
    }
    fn hex4(&mut self) -> u32 {
        let h = std::str::from_utf8(&self.s[self.i..self.i + 4]).unwrap();
        self.i += 4;
        u32::from_str_radix(h, 16).unwrap()
    }
    fn string(&mut self) -> String {
        self.eat(b'"');
        let mut out = Vec::new();
        loop {
            let c = self.s[self.i];
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = self.s[self.i];
                    self.i += 1;
                    let ch = match e {
                        b'n' => '\n',
                        b't' => '\t',
                        b'r' => '\r',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'u' => {
                            let mut cp = self.hex4();
                            if (0xD800..0xDC00).contains(&cp) {
                                self.i += 2; // the "\u" of the low surrogate
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (self.hex4() - 0xDC00);
                            }
                            char::from_u32(cp).unwrap()
                        }
                        other => other as char, // \" \\ \/
                    };
                    out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
                }
                _ => out.push(c),
            }
        }
        String::from_utf8(out).unwrap()
    }
}

fn parse_json(text: &str) -> Json {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let v = p.value();
    p.ws();
    assert_eq!(p.i, text.len(), "JSON: trailing bytes");
    v
}

// ------------------------------------------------ typed nodes -> glmw values

fn value_type(name: &str) -> ValueType {
    (0..13)
        .filter_map(ValueType::from_id)
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("unknown type name {name:?}"))
}

fn scalar(ty: &str, v: &Json) -> Value {
    if let Json::Bool(b) = v {
        assert_eq!(ty, "bool");
        return Value::Bool(*b);
    }
    if ty == "string" {
        return Value::Str(v.str().to_string());
    }
    let Json::Num(n) = v else {
        panic!("expected a number for {ty}, got {v:?}")
    };
    match ty {
        "u8" => Value::U8(n.parse().unwrap()),
        "i8" => Value::I8(n.parse().unwrap()),
        "u16" => Value::U16(n.parse().unwrap()),
        "i16" => Value::I16(n.parse().unwrap()),
        "u32" => Value::U32(n.parse().unwrap()),
        "i32" => Value::I32(n.parse().unwrap()),
        "u64" => Value::U64(n.parse().unwrap()),
        "i64" => Value::I64(n.parse().unwrap()),
        // The fixture writes the f64 repr of the exact f32, so this is exact.
        "f32" => Value::F32(n.parse().unwrap()),
        "f64" => Value::F64(n.parse().unwrap()),
        _ => panic!("unexpected scalar type {ty}"),
    }
}

fn node_value(node: &Json) -> Value {
    let ty = node.get("type").str();
    let v = node.get("value");
    if ty != "array" {
        return scalar(ty, v);
    }
    let elem = node.get("elem").str();
    let Json::Arr(items) = v else {
        panic!("array value expected")
    };
    let items = items
        .iter()
        .map(|it| {
            if elem == "array" {
                node_value(it)
            } else {
                scalar(elem, it)
            }
        })
        .collect();
    Value::array(value_type(elem), items).unwrap()
}

/// Equality that tells -0.0 from 0.0 (Value's PartialEq does not).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::F32(x), Value::F32(y)) => x.to_bits() == y.to_bits(),
        (Value::F64(x), Value::F64(y)) => x.to_bits() == y.to_bits(),
        (Value::Array(xa), Value::Array(xb)) => {
            xa.elem_type() == xb.elem_type()
                && xa.len() == xb.len()
                && (0..xa.len()).all(|i| same(&xa.get(i).unwrap(), &xb.get(i).unwrap()))
        }
        _ => a == b,
    }
}

// ------------------------------------------------------------ the test

fn read_f32(path: &Path) -> Vec<f32> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Runs the fixture generator into a fresh temp dir, or fails the test with
/// instructions.
fn make_fixture() -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("glmw-ggufpy-{}-{nanos}", std::process::id()));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gguf_py/make_fixture.py");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string());
    let out = Command::new(&python).arg(&script).arg(&dir).output().unwrap_or_else(|e| {
        panic!("cannot run {python} ({e}); this test needs Python 3 with gguf-py: pip install gguf")
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => dir,
        Some(3) => panic!("the Python package `gguf` is missing; run: pip install gguf\n{stderr}"),
        _ => panic!(
            "{} failed ({}); is gguf-py installed? (pip install gguf)\n{stderr}",
            script.display(),
            out.status
        ),
    }
}

#[test]
fn gguf_py_crosscheck() {
    let dir = make_fixture();
    let f = GgufFile::open(dir.join("fixture.gguf")).expect("glmw cannot open gguf-py's file");

    // Metadata: same keys, same order, same types and values.
    let text = std::fs::read_to_string(dir.join("metadata.json")).unwrap();
    let Json::Arr(entries) = parse_json(&text) else {
        panic!("metadata.json: not an array")
    };
    let want: Vec<(String, Value)> = entries
        .iter()
        .map(|e| (e.get("key").str().to_string(), node_value(e)))
        .collect();
    let got = f.metadata();
    let got_keys: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
    let want_keys: Vec<&str> = want.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(got_keys, want_keys, "metadata keys differ");
    for ((k, g), (_, w)) in got.iter().zip(&want) {
        assert!(
            same(g, w),
            "metadata {k}: glmw read {g:?}, gguf-py wrote {w:?}"
        );
        assert!(f.get(k).is_some_and(|v| same(v, w)), "get({k:?})");
    }
    assert!(want.len() >= 30, "fixture lists only {} keys", want.len());
    assert_eq!(f.alignment, 64, "general.alignment = 64 must be honoured");

    // Tensor table.
    let listing = std::fs::read_to_string(dir.join("tensors.txt")).unwrap();
    let expected: Vec<(String, u32, Vec<u64>)> = listing
        .lines()
        .map(|l| {
            let p: Vec<&str> = l.split(' ').collect();
            (
                p[0].to_string(),
                p[1].parse().unwrap(),
                p[2].split(',').map(|d| d.parse().unwrap()).collect(),
            )
        })
        .collect();
    let names: Vec<&str> = f.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        expected.iter().map(|e| e.0.as_str()).collect::<Vec<_>>()
    );

    let mut checked = Vec::new();
    for (name, type_id, dims) in &expected {
        let t = f.tensor(name).unwrap();
        assert_eq!(
            t.ggml_type,
            GgmlType::from_id(*type_id).unwrap(),
            "{name} type"
        );
        assert_eq!(&t.dims, dims, "{name} dims");
        assert_eq!(
            t.offset % 64,
            0,
            "{name} offset {} not 64-aligned",
            t.offset
        );
        let data = f.tensor_data(t);
        assert_eq!(data.len() as u64, t.n_bytes, "{name}");

        // Dequantization: bit-identical to gguf-py.
        let want = read_f32(&dir.join(format!("{name}.f32")));
        let got = dequantize_vec(t.ggml_type, data, t.n_elements() as usize)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got.len(), want.len(), "{name}");
        let bad: Vec<String> = (0..got.len())
            .filter(|&i| got[i].to_bits() != want[i].to_bits())
            .take(8)
            .map(|i| {
                format!(
                    "[{i}] glmw {:e} ({:#010x}) gguf-py {:e} ({:#010x})",
                    got[i],
                    got[i].to_bits(),
                    want[i],
                    want[i].to_bits()
                )
            })
            .collect();
        assert!(
            bad.is_empty(),
            "{name} ({}): dequantization differs:\n{}",
            t.ggml_type,
            bad.join("\n")
        );

        // Quantization: byte-identical to gguf-py where the fixture asks.
        let src_path = dir.join(format!("{name}.src.f32"));
        if src_path.exists() {
            let src = read_f32(&src_path);
            let mut q = Vec::new();
            quantize_into(t.ggml_type, &src, &mut q).unwrap();
            let bs = t.ggml_type.type_size() as usize;
            let first = q.iter().zip(data).position(|(a, b)| a != b);
            assert!(
                first.is_none() && q.len() == data.len(),
                "{name}: quantize_into differs from gguf-py at byte {first:?} (block {:?})",
                first.map(|i| i / bs)
            );
            checked.push(format!("{name}(q+dq)"));
        } else {
            checked.push(name.clone());
        }
    }
    eprintln!(
        "gguf-py crosscheck: {} keys; tensors {}",
        want.len(),
        checked.join(" ")
    );
    let _ = std::fs::remove_dir_all(&dir);
}
