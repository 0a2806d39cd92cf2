//! GGUF parser over a memory map. Every read is bounds-checked against the
//! file length and every count is capped before anything is allocated, so a
//! corrupt or hostile file gives an `Error::Gguf` naming the byte offset,
//! never a panic or a huge allocation.

use std::collections::HashMap;
use std::path::Path;

use super::{Array, Strings, Value, ValueType, DEFAULT_ALIGNMENT};
use crate::error::{Error, Result};
use crate::quant::GgmlType;

/// Hard caps (the real GLM-4.7-Flash file: 844 tensors, 60 keys, 321649
/// merges, a chat template of a few KiB).
const MAX_TENSORS: u64 = 1 << 16;
const MAX_KV: u64 = 1 << 16;
const MAX_STRING: u64 = 1 << 24;
const MAX_ARRAY: u64 = 1 << 26;
const MAX_ARRAY_DEPTH: u32 = 4;
const MAX_DIMS: u32 = 4;

/// Metadata keys whose type glmw relies on; a file that stores them with
/// another type is rejected at parse time rather than misread later.
const KNOWN_KEY_TYPES: &[(&str, ValueType, Option<ValueType>)] = &[
    ("general.alignment", ValueType::U32, None),
    ("general.architecture", ValueType::Str, None),
    ("general.name", ValueType::Str, None),
    ("tokenizer.ggml.model", ValueType::Str, None),
    ("tokenizer.ggml.pre", ValueType::Str, None),
    (
        "tokenizer.ggml.tokens",
        ValueType::Array,
        Some(ValueType::Str),
    ),
    (
        "tokenizer.ggml.merges",
        ValueType::Array,
        Some(ValueType::Str),
    ),
    (
        "tokenizer.ggml.token_type",
        ValueType::Array,
        Some(ValueType::I32),
    ),
    ("tokenizer.chat_template", ValueType::Str, None),
];

/// One tensor-info record, with its data position resolved to an absolute
/// file offset and its byte size computed from type and shape.
#[derive(Clone, Debug)]
pub struct TensorInfo {
    pub name: String,
    /// Dimensions, ne0 (the contiguous one) first.
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Absolute byte offset of the tensor's data in the file.
    pub offset: u64,
    pub n_bytes: u64,
}

impl TensorInfo {
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }
    /// Dimension `i`, or 1 past the stored rank (ggml convention).
    pub fn ne(&self, i: usize) -> u64 {
        self.dims.get(i).copied().unwrap_or(1)
    }
}

enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
    Static(&'static [u8]),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
            Bytes::Static(b) => b,
        }
    }
}

/// A parsed GGUF file. Tensor bytes are slices of the map, never copies.
pub struct GgufFile {
    bytes: Bytes,
    pub version: u32,
    pub alignment: u32,
    /// Absolute offset of the data section.
    pub data_offset: u64,
    metadata: Vec<(String, Value)>,
    key_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

impl GgufFile {
    /// Map and parse a file.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        check_regular(path, &shown)?;
        let file = std::fs::File::open(path).map_err(|e| Error::io(&shown, e))?;
        // SAFETY: the map is read-only; glmw never writes the file while it is
        // mapped. Another process truncating it underneath us is the usual
        // mmap caveat that every GGUF loader accepts.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(&shown, e))?;
        Self::parse(Bytes::Mapped(map))
    }

    /// Parse a file held in memory (tests, small fixtures).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile> {
        Self::parse(Bytes::Owned(bytes))
    }

    /// Parse a file compiled into the binary (the built-in model).
    pub fn from_static(bytes: &'static [u8]) -> Result<GgufFile> {
        Self::parse(Bytes::Static(bytes))
    }

    fn parse(bytes: Bytes) -> Result<GgufFile> {
        let mut c = Cursor {
            buf: &bytes,
            pos: 0,
        };
        let version = read_header(&mut c)?;
        let n_tensors = c.count("tensor count", MAX_TENSORS)?;
        let n_kv = c.count("metadata count", MAX_KV)?;
        let (metadata, key_index) = read_metadata(&mut c, n_kv)?;
        let alignment = alignment_of(&metadata, &key_index)?;
        let (raw, tensor_index) = read_tensor_infos(&mut c, n_tensors, alignment)?;
        let data_offset = align_up(c.pos as u64, alignment as u64);
        if n_tensors > 0 && data_offset > bytes.len() as u64 {
            return Err(Error::gguf(
                c.pos as u64,
                "file ends before the tensor data section",
            ));
        }
        let tensors = place_tensors(raw, data_offset, bytes.len() as u64)?;
        check_overlaps(&tensors)?;
        Ok(GgufFile {
            bytes,
            version,
            alignment,
            data_offset,
            metadata,
            key_index,
            tensors,
            tensor_index,
        })
    }

    /// All key/value pairs in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.key_index.get(key).map(|&i| &self.metadata[i].1)
    }

    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// The tensor's bytes, straight from the map (bounds were checked at parse).
    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        &self.bytes[t.offset as usize..(t.offset + t.n_bytes) as usize]
    }

    /// Total file size in bytes.
    pub fn file_len(&self) -> u64 {
        self.bytes.len() as u64
    }

    // ---- typed getters: None when absent, an error when the type is wrong ----

    pub fn get_str(&self, key: &str) -> Result<Option<&str>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Str(s)) => Ok(Some(s)),
            Some(v) => Err(wrong_type(key, "string", v)),
        }
    }

    /// Any integer type, range-checked into u32.
    pub fn get_u32(&self, key: &str) -> Result<Option<u32>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.as_int() {
                Some(i) if (0..=u32::MAX as i128).contains(&i) => Ok(Some(i as u32)),
                Some(i) => Err(Error::Model(format!(
                    "metadata {key} = {i} is out of range for u32"
                ))),
                None => Err(wrong_type(key, "integer", v)),
            },
        }
    }

    /// Any float or integer type as f32.
    pub fn get_f32(&self, key: &str) -> Result<Option<f32>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(|x| Some(x as f32))
                .ok_or_else(|| wrong_type(key, "number", v)),
        }
    }

    pub fn get_bool(&self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(wrong_type(key, "bool", v)),
        }
    }

    /// An array of strings, packed as the file stores it.
    pub fn get_str_array(&self, key: &str) -> Result<Option<&Strings>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(Array::Str(items))) => Ok(Some(items)),
            Some(v) => Err(wrong_type(key, "array of strings", v)),
        }
    }

    /// An array of any integer type, each element range-checked into i32.
    pub fn get_i32_array(&self, key: &str) -> Result<Option<Vec<i32>>> {
        let items = match self.get(key) {
            None => return Ok(None),
            Some(Value::Array(Array::I32(v))) => return Ok(Some(v.clone())),
            Some(Value::Array(a)) => a,
            Some(v) => return Err(wrong_type(key, "array of integers", v)),
        };
        let mut out = Vec::with_capacity(items.len());
        for i in 0..items.len() {
            let v = items.get(i).unwrap_or(Value::Bool(false));
            match v.as_int() {
                Some(i) if (i32::MIN as i128..=i32::MAX as i128).contains(&i) => out.push(i as i32),
                _ => return Err(wrong_type(key, "array of integers", &v)),
            }
        }
        Ok(Some(out))
    }

    /// Heap bytes the parsed metadata holds (keys and values): it stays
    /// within a small constant of the metadata's size in the file.
    pub fn metadata_heap_bytes(&self) -> usize {
        let per_entry = std::mem::size_of::<(String, Value)>();
        self.metadata
            .iter()
            .map(|(k, v)| per_entry + k.capacity() + v.heap_bytes())
            .sum()
    }
}

/// Only a regular file is mapped: a FIFO would block the open forever, and
/// a directory or a device fails with an unhelpful "No such device".
fn check_regular(path: &Path, shown: &str) -> Result<()> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(shown, e))?;
    let why = if meta.is_dir() {
        "is a directory; give the path of a .gguf model file"
    } else if !meta.is_file() {
        "is not a regular file (a FIFO, socket or device); glmw maps model files and needs a regular file"
    } else if meta.len() == 0 {
        "is empty; not a GGUF model file"
    } else {
        return Ok(());
    };
    Err(Error::io(
        shown,
        std::io::Error::new(std::io::ErrorKind::InvalidInput, why),
    ))
}

fn wrong_type(key: &str, want: &str, got: &Value) -> Error {
    Error::Model(format!(
        "metadata {key} should be {want}, found {}",
        got.value_type().name()
    ))
}

fn check_known_type(key: &str, value: &Value, at: usize) -> Result<()> {
    let Some((_, want, elem)) = KNOWN_KEY_TYPES.iter().find(|k| k.0 == key) else {
        return Ok(());
    };
    let ok = match (value, elem) {
        (Value::Array(a), Some(e)) => *want == ValueType::Array && a.elem_type() == *e,
        (v, None) => v.value_type() == *want,
        _ => false,
    };
    if ok {
        return Ok(());
    }
    let want_s = match elem {
        Some(e) => format!("array of {}", e.name()),
        None => want.name().to_string(),
    };
    let got_s = match value {
        Value::Array(a) => format!("array of {}", a.elem_type().name()),
        v => v.value_type().name().to_string(),
    };
    Err(Error::gguf(
        at as u64,
        format!("metadata key {key:?} has type {got_s}, expected {want_s}"),
    ))
}

fn tensor_bytes(name: &str, dims: &[u64], ty: GgmlType) -> std::result::Result<u64, String> {
    let mut n: u64 = 1;
    for &d in dims {
        n = n
            .checked_mul(d)
            .ok_or_else(|| format!("tensor {name:?} shape {dims:?} overflows"))?;
    }
    let row = ty.row_bytes(dims[0]).ok_or_else(|| {
        format!(
            "tensor {name:?} first dimension {} is not a multiple of the {ty} block size {}",
            dims[0],
            ty.block_size()
        )
    })?;
    let rows = n / dims[0];
    row.checked_mul(rows)
        .filter(|b| *b < (1u64 << 62))
        .ok_or_else(|| format!("tensor {name:?} shape {dims:?} overflows"))
}

fn check_overlaps(tensors: &[TensorInfo]) -> Result<()> {
    let mut order: Vec<&TensorInfo> = tensors.iter().collect();
    order.sort_by_key(|t| t.offset);
    for w in order.windows(2) {
        if w[0].offset + w[0].n_bytes > w[1].offset {
            return Err(Error::gguf(
                w[1].offset,
                format!("tensor data of {:?} and {:?} overlap", w[0].name, w[1].name),
            ));
        }
    }
    Ok(())
}

pub(crate) fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// Bounds-checked little-endian reader over the header.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        let end = (self.pos as u64)
            .checked_add(n)
            .filter(|e| *e <= self.buf.len() as u64);
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end as usize];
                self.pos = end as usize;
                Ok(s)
            }
            None => Err(Error::gguf(
                self.pos as u64,
                format!(
                    "file truncated while reading {what} ({n} bytes needed, {} left)",
                    self.buf.len() - self.pos
                ),
            )),
        }
    }

    fn arr<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N as u64, what)?);
        Ok(out)
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.arr(what)?))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.arr(what)?))
    }

    /// A u64 count checked against a cap and against the bytes left (each
    /// counted item takes at least one byte), before anything is allocated.
    fn count(&mut self, what: &str, cap: u64) -> Result<u64> {
        let at = self.pos as u64;
        let n = self.u64(what)?;
        if n > cap {
            return Err(Error::gguf(
                at,
                format!("{what} {n} exceeds the limit of {cap}"),
            ));
        }
        if n > (self.buf.len() - self.pos) as u64 {
            return Err(Error::gguf(at, format!("{what} {n} is larger than the rest of the file; the file is truncated or corrupt")));
        }
        Ok(n)
    }

    fn string(&mut self, what: &str) -> Result<String> {
        self.str(what).map(str::to_string)
    }

    /// A length-prefixed UTF-8 string, borrowed from the file.
    fn str(&mut self, what: &str) -> Result<&'a str> {
        let at = self.pos as u64;
        let len = self.u64(what)?;
        if len > MAX_STRING {
            return Err(Error::gguf(
                at,
                format!("{what} length {len} exceeds the limit of {MAX_STRING}"),
            ));
        }
        let bytes = self.take(len, what)?;
        std::str::from_utf8(bytes)
            .map_err(|_| Error::gguf(at + 8, format!("{what} is not valid UTF-8")))
    }

    fn value_type(&mut self, what: &str) -> Result<ValueType> {
        let at = self.pos as u64;
        let id = self.u32(what)?;
        ValueType::from_id(id).ok_or_else(|| Error::gguf(at, format!("unknown {what} {id}")))
    }

    fn value(&mut self, ty: ValueType, depth: u32) -> Result<Value> {
        let at = self.pos as u64;
        Ok(match ty {
            ValueType::U8 => Value::U8(self.arr::<1>("u8 value")?[0]),
            ValueType::I8 => Value::I8(self.arr::<1>("i8 value")?[0] as i8),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.arr("u16 value")?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.arr("i16 value")?)),
            ValueType::U32 => Value::U32(self.u32("u32 value")?),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.arr("i32 value")?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.arr("f32 value")?)),
            ValueType::U64 => Value::U64(self.u64("u64 value")?),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.arr("i64 value")?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.arr("f64 value")?)),
            ValueType::Bool => match self.arr::<1>("bool value")?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => {
                    return Err(Error::gguf(
                        at,
                        format!("bool value {b} is neither 0 nor 1"),
                    ))
                }
            },
            ValueType::Str => Value::Str(self.string("string value")?),
            ValueType::Array => {
                let elem = self.value_type("array element type")?;
                Value::Array(self.array(elem, depth)?)
            }
        })
    }

    /// An array's length and `elem`s, packed (`Array`). The length is
    /// checked against the bytes left before anything is reserved.
    fn array(&mut self, elem: ValueType, depth: u32) -> Result<Array> {
        let at = self.pos as u64;
        if depth >= MAX_ARRAY_DEPTH {
            return Err(Error::gguf(
                at,
                format!("arrays nested deeper than {MAX_ARRAY_DEPTH}"),
            ));
        }
        let n = self.count("array length", MAX_ARRAY)?;
        let left = (self.buf.len() - self.pos) as u64;
        if n.saturating_mul(min_size(elem)) > left {
            return Err(Error::gguf(at, format!("array of {n} {} is larger than the rest of the file; the file is truncated or corrupt", elem.name())));
        }
        let n = n as usize;
        macro_rules! packed {
            ($t:ident, $ty:ty) => {
                Array::$t(bytemuck::pod_collect_to_vec::<u8, $ty>(
                    self.take((n * std::mem::size_of::<$ty>()) as u64, "array")?,
                ))
            };
        }
        Ok(match elem {
            ValueType::U8 => Array::U8(self.take(n as u64, "array")?.to_vec()),
            ValueType::I8 => packed!(I8, i8),
            ValueType::U16 => packed!(U16, u16),
            ValueType::I16 => packed!(I16, i16),
            ValueType::U32 => packed!(U32, u32),
            ValueType::I32 => packed!(I32, i32),
            ValueType::F32 => packed!(F32, f32),
            ValueType::U64 => packed!(U64, u64),
            ValueType::I64 => packed!(I64, i64),
            ValueType::F64 => packed!(F64, f64),
            ValueType::Bool => {
                let bytes = self.take(n as u64, "array")?;
                if let Some(b) = bytes.iter().find(|b| **b > 1) {
                    return Err(Error::gguf(
                        at,
                        format!("bool value {b} is neither 0 nor 1"),
                    ));
                }
                Array::Bool(bytes.iter().map(|b| *b == 1).collect())
            }
            ValueType::Str => {
                let mut out = Strings::with_capacity(n);
                for _ in 0..n {
                    out.push(self.str("string value")?);
                }
                Array::Str(out)
            }
            ValueType::Array => {
                let mut out = Vec::with_capacity(n);
                for _ in 0..n {
                    let elem = self.value_type("array element type")?;
                    out.push(self.array(elem, depth + 1)?);
                }
                Array::Array(out)
            }
        })
    }
}

/// The fewest bytes one `elem` takes in the file.
fn min_size(elem: ValueType) -> u64 {
    match elem {
        ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
        ValueType::U16 | ValueType::I16 => 2,
        ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
        ValueType::U64 | ValueType::I64 | ValueType::F64 | ValueType::Str => 8,
        // element type (4) and length (8) of the inner array
        ValueType::Array => 12,
    }
}

/// The magic and the version (2 or 3).
fn read_header(c: &mut Cursor) -> Result<u32> {
    let magic = c.take(4, "magic")?;
    if magic != b"GGUF" {
        return Err(Error::gguf(
            0,
            format!("bad magic {magic:02x?}, expected \"GGUF\"; not a GGUF file"),
        ));
    }
    let version = c.u32("version")?;
    if version != 2 && version != 3 {
        return Err(Error::gguf(
            4,
            format!("unsupported GGUF version {version} (glmw reads versions 2 and 3)"),
        ));
    }
    Ok(version)
}

type Metadata = (Vec<(String, Value)>, HashMap<String, usize>);

/// `n_kv` key/value pairs, in file order, and their index by key.
fn read_metadata(c: &mut Cursor, n_kv: u64) -> Result<Metadata> {
    let mut metadata = Vec::with_capacity(n_kv as usize);
    let mut key_index = HashMap::new();
    for _ in 0..n_kv {
        let at = c.pos;
        let key = c.string("metadata key")?;
        let ty_at = c.pos;
        let ty = c.value_type("metadata value type")?;
        let value = c.value(ty, 0)?;
        check_known_type(&key, &value, ty_at)?;
        if key_index.insert(key.clone(), metadata.len()).is_some() {
            return Err(Error::gguf(
                at as u64,
                format!("duplicate metadata key {key:?}"),
            ));
        }
        metadata.push((key, value));
    }
    Ok((metadata, key_index))
}

/// `general.alignment`, or the default; a power of two.
fn alignment_of(metadata: &[(String, Value)], key_index: &HashMap<String, usize>) -> Result<u32> {
    let alignment = match key_index.get("general.alignment").map(|&i| &metadata[i].1) {
        Some(Value::U32(a)) => *a,
        _ => DEFAULT_ALIGNMENT,
    };
    if alignment == 0 || !alignment.is_power_of_two() {
        return Err(Error::gguf(
            0,
            format!("general.alignment = {alignment} is not a power of two"),
        ));
    }
    Ok(alignment)
}

/// Each tensor's info record (offsets still relative to the data
/// section) with the file position it was read at, and the index by name.
type TensorInfos = (Vec<(usize, TensorInfo)>, HashMap<String, usize>);

fn read_tensor_infos(c: &mut Cursor, n_tensors: u64, alignment: u32) -> Result<TensorInfos> {
    let mut raw = Vec::with_capacity(n_tensors as usize);
    let mut tensor_index = HashMap::new();
    for _ in 0..n_tensors {
        let at = c.pos;
        let t = read_tensor_info(c, alignment)?;
        if tensor_index.insert(t.name.clone(), raw.len()).is_some() {
            return Err(Error::gguf(
                at as u64,
                format!("duplicate tensor name {:?}", t.name),
            ));
        }
        raw.push((at, t));
    }
    Ok((raw, tensor_index))
}

/// One tensor info record: name, dimensions, type, relative offset.
fn read_tensor_info(c: &mut Cursor, alignment: u32) -> Result<TensorInfo> {
    let at = c.pos;
    let name = c.string("tensor name")?;
    let n_dims = c.u32("tensor rank")?;
    if n_dims == 0 || n_dims > MAX_DIMS {
        return Err(Error::gguf(
            at as u64,
            format!("tensor {name:?} has {n_dims} dimensions (1..={MAX_DIMS} allowed)"),
        ));
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for _ in 0..n_dims {
        let d_at = c.pos;
        let d = c.u64("tensor dimension")? as i64;
        if d <= 0 {
            return Err(Error::gguf(
                d_at as u64,
                format!("tensor {name:?} has dimension {d}; dimensions must be positive"),
            ));
        }
        dims.push(d as u64);
    }
    let t_at = c.pos;
    let type_id = c.u32("tensor type")?;
    let ggml_type = GgmlType::from_id(type_id).ok_or_else(|| {
        Error::gguf(
            t_at as u64,
            format!("tensor {name:?} has unknown ggml type id {type_id}"),
        )
    })?;
    let rel = c.u64("tensor data offset")?;
    let n_bytes = tensor_bytes(&name, &dims, ggml_type).map_err(|m| Error::gguf(at as u64, m))?;
    if rel % alignment as u64 != 0 {
        return Err(Error::gguf(
            at as u64,
            format!(
                "tensor {name:?} data offset {rel} is not a multiple of the alignment {alignment}"
            ),
        ));
    }
    Ok(TensorInfo {
        name,
        dims,
        ggml_type,
        offset: rel,
        n_bytes,
    })
}

/// Absolute offsets, each tensor's data inside the file.
fn place_tensors(
    raw: Vec<(usize, TensorInfo)>,
    data_offset: u64,
    file_len: u64,
) -> Result<Vec<TensorInfo>> {
    let mut tensors = Vec::with_capacity(raw.len());
    for (at, mut t) in raw {
        let abs = data_offset.checked_add(t.offset);
        let end = abs.and_then(|a| a.checked_add(t.n_bytes));
        match abs.zip(end) {
            Some((abs, end)) if end <= file_len => t.offset = abs,
            _ => {
                return Err(Error::gguf(
                    at as u64,
                    format!(
                        "tensor {:?} data ({} bytes at data offset {}) runs past the end of the file ({file_len} bytes); the file is truncated",
                        t.name, t.n_bytes, t.offset
                    ),
                ))
            }
        }
        tensors.push(t);
    }
    Ok(tensors)
}
