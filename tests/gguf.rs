//! GGUF reader and writer: round trip of every value type, and malformed
//! files that must give a clear error (never a panic).

mod common;

use glmw::gguf::{Array, GgufFile, GgufWriter, TensorSpec, Value, ValueType};
use glmw::quant::GgmlType;
use glmw::Error;

// ---- a raw byte-level builder, so that invalid files can be crafted ----

#[derive(Clone)]
struct RawTensor {
    name: Vec<u8>,
    dims: Vec<i64>,
    ty: u32,
    offset: u64,
}

#[derive(Clone)]
struct Raw {
    magic: [u8; 4],
    version: u32,
    n_tensors: Option<u64>,
    kv: Vec<Vec<u8>>,
    tensors: Vec<RawTensor>,
    data: usize,
}

fn s(b: &mut Vec<u8>, x: &[u8]) {
    b.extend_from_slice(&(x.len() as u64).to_le_bytes());
    b.extend_from_slice(x);
}

/// A key/value record with a raw value (type id + payload).
fn kv(key: &str, ty: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    s(&mut b, key.as_bytes());
    b.extend_from_slice(&ty.to_le_bytes());
    b.extend_from_slice(payload);
    b
}

fn kv_str(key: &str, v: &str) -> Vec<u8> {
    let mut p = Vec::new();
    s(&mut p, v.as_bytes());
    kv(key, 8, &p)
}

fn tensor(name: &str, dims: &[i64], ty: u32, offset: u64) -> RawTensor {
    RawTensor {
        name: name.as_bytes().to_vec(),
        dims: dims.to_vec(),
        ty,
        offset,
    }
}

impl Raw {
    /// A valid file: one string key and two F32 tensors of 32 elements.
    fn valid() -> Raw {
        Raw {
            magic: *b"GGUF",
            version: 3,
            n_tensors: None,
            kv: vec![kv_str("general.architecture", "test")],
            tensors: vec![tensor("a", &[32], 0, 0), tensor("b", &[8, 4], 0, 128)],
            data: 256,
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&self.magic);
        b.extend_from_slice(&self.version.to_le_bytes());
        b.extend_from_slice(
            &self
                .n_tensors
                .unwrap_or(self.tensors.len() as u64)
                .to_le_bytes(),
        );
        b.extend_from_slice(&(self.kv.len() as u64).to_le_bytes());
        for k in &self.kv {
            b.extend_from_slice(k);
        }
        for t in &self.tensors {
            s(&mut b, &t.name);
            b.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                b.extend_from_slice(&d.to_le_bytes());
            }
            b.extend_from_slice(&t.ty.to_le_bytes());
            b.extend_from_slice(&t.offset.to_le_bytes());
        }
        while b.len() % 32 != 0 {
            b.push(0);
        }
        b.extend(std::iter::repeat_n(0x3fu8, self.data));
        b
    }
}

fn parse_err(bytes: Vec<u8>) -> String {
    match GgufFile::from_bytes(bytes) {
        Ok(_) => panic!("malformed file was accepted"),
        Err(e) => e.to_string(),
    }
}

fn expect(raw: Raw, needle: &str) {
    let msg = parse_err(raw.bytes());
    assert!(
        msg.contains(needle),
        "error {msg:?} does not mention {needle:?}"
    );
    assert!(
        msg.starts_with("malformed GGUF at byte"),
        "error {msg:?} does not give an offset"
    );
}

#[test]
fn valid_raw_file_parses() {
    let f = GgufFile::from_bytes(Raw::valid().bytes()).unwrap();
    assert_eq!(f.tensors().len(), 2);
    assert_eq!(f.tensor("b").unwrap().n_bytes, 128);
    assert_eq!(f.tensor_data(f.tensor("a").unwrap()).len(), 128);
}

#[test]
fn malformed_files_give_clear_errors() {
    let mut r = Raw::valid();
    r.magic = *b"GGML";
    expect(r, "bad magic");

    let mut r = Raw::valid();
    r.version = 1;
    expect(r, "unsupported GGUF version 1");

    expect_bytes(b"GGUF\x03\x00".to_vec(), "truncated");

    let mut r = Raw::valid();
    r.n_tensors = Some(1 << 40);
    expect(r, "exceeds the limit");

    let mut r = Raw::valid();
    r.kv.push(kv("general.big", 8, &(1u64 << 40).to_le_bytes()));
    expect(r, "exceeds the limit");

    let mut r = Raw::valid();
    r.kv.push(kv("x.weird", 13, &[0; 8]));
    expect(r, "unknown metadata value type 13");

    let mut r = Raw::valid();
    r.kv.push(kv_str("general.architecture", "again"));
    expect(r, "duplicate metadata key");

    let mut r = Raw::valid();
    r.tensors[1].name = b"a".to_vec();
    expect(r, "duplicate tensor name");

    let mut r = Raw::valid();
    r.tensors[0].ty = 4;
    expect(r, "unknown ggml type id 4");

    let mut r = Raw::valid();
    r.tensors[0].dims = vec![32, 0];
    expect(r, "dimensions must be positive");

    let mut r = Raw::valid();
    r.tensors[0].dims = vec![32, -2];
    expect(r, "dimensions must be positive");

    let mut r = Raw::valid();
    r.tensors[0].dims = vec![32, 1, 1, 1, 1];
    expect(r, "5 dimensions");

    let mut r = Raw::valid();
    r.tensors[1].offset = 130;
    expect(r, "not a multiple of the alignment");

    let mut r = Raw::valid();
    r.tensors[1].offset = 96;
    expect(r, "overlap");

    let mut r = Raw::valid();
    r.tensors[1].offset = 1 << 20;
    expect(r, "past the end of the file");

    let mut r = Raw::valid();
    r.tensors[0].dims = vec![32, i64::MAX, 4];
    expect(r, "overflows");

    let mut r = Raw::valid();
    r.tensors[0].ty = 2; // Q4_0 needs ne0 % 32 == 0
    r.tensors[0].dims = vec![48];
    expect(r, "block size");

    let mut r = Raw::valid();
    r.kv.push(kv_str("general.alignment", "32"));
    expect(r, "has type string, expected u32");

    let mut r = Raw::valid();
    r.kv.push(kv("general.alignment", 4, &48u32.to_le_bytes()));
    expect(r, "power of two");

    let mut r = Raw::valid();
    r.kv.push(kv("x.flag", 7, &[2]));
    expect(r, "neither 0 nor 1");

    let mut r = Raw::valid();
    let mut p = Vec::new();
    s(&mut p, &[0xff, 0xfe]);
    r.kv.push(kv("x.text", 8, &p));
    expect(r, "not valid UTF-8");

    let mut r = Raw::valid();
    let mut p = 4u32.to_le_bytes().to_vec(); // array of u32 claiming 2^30 items
    p.extend_from_slice(&(1u64 << 30).to_le_bytes());
    r.kv.push(kv("x.arr", 9, &p));
    expect(r, "exceeds the limit");

    let mut r = Raw::valid();
    let mut p = 9u32.to_le_bytes().to_vec(); // arrays nested too deep
    for _ in 0..8 {
        p.extend_from_slice(&1u64.to_le_bytes());
        p.extend_from_slice(&9u32.to_le_bytes());
    }
    r.kv.push(kv("x.deep", 9, &p));
    expect(r, "nested deeper");
}

fn expect_bytes(b: Vec<u8>, needle: &str) {
    let msg = parse_err(b);
    assert!(
        msg.contains(needle),
        "error {msg:?} does not mention {needle:?}"
    );
}

#[test]
fn wrong_type_for_known_tokenizer_key() {
    let mut r = Raw::valid();
    let mut p = 5u32.to_le_bytes().to_vec();
    p.extend_from_slice(&1u64.to_le_bytes());
    p.extend_from_slice(&7i32.to_le_bytes());
    r.kv.push(kv("tokenizer.ggml.tokens", 9, &p));
    expect(r, "expected array of string");
}

#[test]
fn writer_round_trips_every_value_type() {
    let dir = common::temp_dir("gguf-roundtrip");
    let path = dir.join("rt.gguf");
    let md = vec![
        ("a.u8".to_string(), Value::U8(200)),
        ("a.i8".into(), Value::I8(-100)),
        ("a.u16".into(), Value::U16(60000)),
        ("a.i16".into(), Value::I16(-30000)),
        ("a.u32".into(), Value::U32(4_000_000_000)),
        ("a.i32".into(), Value::I32(-2_000_000_000)),
        ("a.f32".into(), Value::F32(1.5e-5)),
        ("a.bool".into(), Value::Bool(true)),
        ("a.str".into(), Value::Str("héllo ✓".into())),
        ("a.u64".into(), Value::U64(u64::MAX)),
        ("a.i64".into(), Value::I64(i64::MIN)),
        ("a.f64".into(), Value::F64(-2.5e300)),
        ("a.empty".into(), Value::Array(Array::new(ValueType::U8))),
        (
            "a.strs".into(),
            Value::Array(Array::Str(["x y", ""].into_iter().collect())),
        ),
        (
            "a.nested".into(),
            Value::Array(Array::Array(vec![
                Array::I32(vec![1, -2]),
                Array::Str(["z"].into_iter().collect()),
            ])),
        ),
        (
            "a.floats".into(),
            Value::array(ValueType::F64, vec![Value::F64(0.5), Value::F64(-1e300)]).unwrap(),
        ),
        (
            "a.bools".into(),
            Value::Array(Array::Bool(vec![true, false])),
        ),
        ("general.alignment".into(), Value::U32(64)),
    ];
    let specs = vec![
        TensorSpec::new("t0", &[64, 3], GgmlType::F32),
        TensorSpec::new("t1", &[32, 2, 2], GgmlType::Q8_0),
        TensorSpec::new("t2", &[256], GgmlType::Q6_K),
    ];
    let mut w = GgufWriter::create(&path, &md, &specs).unwrap();
    let sizes: Vec<u64> = specs.iter().map(|t| t.n_bytes().unwrap()).collect();
    for (i, n) in sizes.iter().enumerate() {
        let data: Vec<u8> = (0..*n)
            .map(|k| (k as u8).wrapping_mul(7).wrapping_add(i as u8))
            .collect();
        // Write in uneven chunks to exercise the streaming path.
        for c in data.chunks(17) {
            w.write_data(c).unwrap();
        }
    }
    w.finish().unwrap();

    let f = GgufFile::open(&path).unwrap();
    assert_eq!(f.alignment, 64);
    assert_eq!(f.metadata(), &md[..]);
    for (i, spec) in specs.iter().enumerate() {
        let t = f.tensor(&spec.name).unwrap();
        assert_eq!(t.dims, spec.dims);
        assert_eq!(t.ggml_type, spec.ggml_type);
        assert_eq!(t.offset % 64, 0);
        let d = f.tensor_data(t);
        assert_eq!(d.len() as u64, sizes[i]);
        assert!(d
            .iter()
            .enumerate()
            .all(|(k, &b)| b == (k as u8).wrapping_mul(7).wrapping_add(i as u8)));
    }
}

#[test]
fn writer_rejects_short_or_long_data() {
    let specs = vec![TensorSpec::new("t", &[32], GgmlType::F32)];
    let w = GgufWriter::new(Vec::new(), "mem".into(), &[], &specs).unwrap();
    assert!(matches!(w.finish(), Err(Error::InvalidArgument(_))));
    let mut w = GgufWriter::new(Vec::new(), "mem".into(), &[], &specs).unwrap();
    assert!(w.write_data(&[0u8; 129]).is_err());
}

#[test]
fn missing_file_is_an_io_error() {
    let e = GgufFile::open("/nonexistent/dir/model.gguf").err().unwrap();
    assert!(matches!(e, Error::Io { .. }), "{e}");
}

#[test]
fn truncation_and_corruption_never_panic() {
    let bytes = std::fs::read(common::tiny_model()).unwrap();
    assert!(GgufFile::from_bytes(bytes.clone()).is_ok());
    for i in 0..64 {
        let cut = bytes.len() * i / 64;
        let r = GgufFile::from_bytes(bytes[..cut].to_vec());
        assert!(
            r.is_err(),
            "file truncated to {cut} of {} bytes was accepted",
            bytes.len()
        );
    }
    // Flip bytes across the header (metadata and tensor table): any outcome
    // but a panic is fine.
    let f = GgufFile::from_bytes(bytes.clone()).unwrap();
    let header = f.data_offset as usize;
    let mut x = 0x2545F4914F6CDD1Du64;
    for _ in 0..300 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut b = bytes[..header].to_vec();
        let pos = (x as usize) % header;
        b[pos] ^= (x >> 32) as u8 | 1;
        b.extend_from_slice(&bytes[header..]);
        let _ = GgufFile::from_bytes(b);
    }
}

/// Issue 12: metadata arrays are stored packed, so a file whose metadata is
/// one huge array costs about its own size, not 32 bytes per element.
#[test]
fn metadata_memory_stays_near_its_size_in_the_file() {
    let n = 8 << 20;
    for (key, value) in [
        ("big.u8", Value::Array(Array::U8(vec![7; n]))),
        (
            "big.strs",
            Value::Array(Array::Str((0..n / 8).map(|_| "").collect())),
        ),
        (
            "big.nested",
            Value::Array(Array::Array(vec![Array::new(ValueType::I32); n / 16])),
        ),
    ] {
        let md = vec![(key.to_string(), value.clone())];
        let bytes = GgufWriter::new(Vec::new(), "mem".into(), &md, &[])
            .unwrap()
            .finish()
            .unwrap();
        let len = bytes.len();
        let f = GgufFile::from_bytes(bytes).unwrap();
        assert_eq!(f.get(key), Some(&value));
        // An empty inner array is 12 bytes in the file and a 56-byte
        // `Array` here: the worst case. Flat arrays cost about 1x.
        let held = f.metadata_heap_bytes();
        let factor = if key == "big.nested" { 5 } else { 2 };
        assert!(
            held <= factor * len + (64 << 10),
            "{key}: {held} bytes held for {len} bytes of file"
        );
    }
}
