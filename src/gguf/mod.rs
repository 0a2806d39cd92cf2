//! GGUF v3 container: typed metadata, the tensor table and zero-copy tensor
//! bytes over a memory map (`reader`), and a streaming writer (`writer`).
//! Format summary: `model-spec.md` §1.

mod reader;
mod writer;

pub use reader::{GgufFile, TensorInfo};
pub use writer::{GgufWriter, TensorSpec};

/// Alignment of the data section and of every tensor when the file does not
/// set `general.alignment`.
pub const DEFAULT_ALIGNMENT: u32 = 32;

/// Metadata value type ids, in GGUF order (0..=12).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
    Str,
    Array,
    U64,
    I64,
    F64,
}

impl ValueType {
    const ALL: [ValueType; 13] = [
        ValueType::U8,
        ValueType::I8,
        ValueType::U16,
        ValueType::I16,
        ValueType::U32,
        ValueType::I32,
        ValueType::F32,
        ValueType::Bool,
        ValueType::Str,
        ValueType::Array,
        ValueType::U64,
        ValueType::I64,
        ValueType::F64,
    ];

    pub fn from_id(id: u32) -> Option<ValueType> {
        Self::ALL.get(id as usize).copied()
    }

    pub fn id(self) -> u32 {
        // Declared in GGUF order, so the discriminant is the id.
        self as u32
    }

    pub fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::I8 => "i8",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::Str => "string",
            ValueType::Array => "array",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F64 => "f64",
        }
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(String),
    U64(u64),
    I64(i64),
    F64(f64),
    Array(Array),
}

/// A metadata array, stored packed: a vector of its element type, or one
/// text buffer for strings. Memory stays within a small constant of the
/// array's size in the file (a 32-byte `Value` per element would be up to
/// 32 times the file: issue 12). Arrays of arrays hold their own types.
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    Str(Strings),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
    Array(Vec<Array>),
}

/// A packed array of strings: their text back to back and where each ends.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Strings {
    text: String,
    ends: Vec<usize>,
}

impl Strings {
    pub fn with_capacity(n: usize) -> Strings {
        Strings {
            text: String::new(),
            ends: Vec::with_capacity(n),
        }
    }
    pub fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.ends.push(self.text.len());
    }
    pub fn len(&self) -> usize {
        self.ends.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.text.get(start..end)
    }
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
    fn heap_bytes(&self) -> usize {
        self.text.capacity() + vec_bytes(&self.ends)
    }
}

impl<S: AsRef<str>> FromIterator<S> for Strings {
    fn from_iter<I: IntoIterator<Item = S>>(items: I) -> Strings {
        let mut out = Strings::default();
        for s in items {
            out.push(s.as_ref());
        }
        out
    }
}

/// `$m!(variant)` for every numeric array variant (they differ only in type).
macro_rules! numeric_arrays {
    ($m:ident) => {
        $m!(U8);
        $m!(I8);
        $m!(U16);
        $m!(I16);
        $m!(U32);
        $m!(I32);
        $m!(F32);
        $m!(U64);
        $m!(I64);
        $m!(F64);
    };
}

impl Array {
    /// An empty array of `elem`s.
    pub fn new(elem: ValueType) -> Array {
        match elem {
            ValueType::U8 => Array::U8(Vec::new()),
            ValueType::I8 => Array::I8(Vec::new()),
            ValueType::U16 => Array::U16(Vec::new()),
            ValueType::I16 => Array::I16(Vec::new()),
            ValueType::U32 => Array::U32(Vec::new()),
            ValueType::I32 => Array::I32(Vec::new()),
            ValueType::F32 => Array::F32(Vec::new()),
            ValueType::Bool => Array::Bool(Vec::new()),
            ValueType::Str => Array::Str(Strings::default()),
            ValueType::U64 => Array::U64(Vec::new()),
            ValueType::I64 => Array::I64(Vec::new()),
            ValueType::F64 => Array::F64(Vec::new()),
            ValueType::Array => Array::Array(Vec::new()),
        }
    }

    /// Pack `items`, which must all be `elem`s.
    pub fn from_values(elem: ValueType, items: Vec<Value>) -> Result<Array, String> {
        let mut a = Array::new(elem);
        for v in items {
            a.push(v)?;
        }
        Ok(a)
    }

    /// Append `v`, which must be of the element type.
    pub fn push(&mut self, v: Value) -> Result<(), String> {
        macro_rules! arm {
            ($t:ident) => {
                if let (Array::$t(a), Value::$t(x)) = (&mut *self, &v) {
                    a.push(*x);
                    return Ok(());
                }
            };
        }
        numeric_arrays!(arm);
        match (&mut *self, v) {
            (Array::Bool(a), Value::Bool(x)) => a.push(x),
            (Array::Str(a), Value::Str(x)) => a.push(&x),
            (Array::Array(a), Value::Array(x)) => a.push(x),
            (a, v) => {
                return Err(format!(
                    "array of {} cannot hold a {}",
                    a.elem_type().name(),
                    v.value_type().name()
                ))
            }
        }
        Ok(())
    }

    pub fn elem_type(&self) -> ValueType {
        macro_rules! arm {
            ($t:ident) => {
                if let Array::$t(_) = self {
                    return ValueType::$t;
                }
            };
        }
        numeric_arrays!(arm);
        match self {
            Array::Bool(_) => ValueType::Bool,
            Array::Str(_) => ValueType::Str,
            _ => ValueType::Array,
        }
    }

    pub fn len(&self) -> usize {
        macro_rules! arm {
            ($t:ident) => {
                if let Array::$t(a) = self {
                    return a.len();
                }
            };
        }
        numeric_arrays!(arm);
        match self {
            Array::Bool(a) => a.len(),
            Array::Str(a) => a.len(),
            Array::Array(a) => a.len(),
            _ => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as a `Value` (a copy).
    pub fn get(&self, i: usize) -> Option<Value> {
        macro_rules! arm {
            ($t:ident) => {
                if let Array::$t(a) = self {
                    return a.get(i).map(|x| Value::$t(*x));
                }
            };
        }
        numeric_arrays!(arm);
        match self {
            Array::Bool(a) => a.get(i).map(|x| Value::Bool(*x)),
            Array::Str(a) => a.get(i).map(|s| Value::Str(s.to_string())),
            Array::Array(a) => a.get(i).map(|x| Value::Array(x.clone())),
            _ => None,
        }
    }

    /// Heap bytes held (the size the parsed metadata costs).
    pub fn heap_bytes(&self) -> usize {
        macro_rules! arm {
            ($t:ident) => {
                if let Array::$t(a) = self {
                    return vec_bytes(a);
                }
            };
        }
        numeric_arrays!(arm);
        match self {
            Array::Bool(a) => vec_bytes(a),
            Array::Str(a) => a.heap_bytes(),
            Array::Array(a) => vec_bytes(a) + a.iter().map(Array::heap_bytes).sum::<usize>(),
            _ => 0,
        }
    }
}

fn vec_bytes<T>(v: &Vec<T>) -> usize {
    v.capacity() * std::mem::size_of::<T>()
}

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::Str(_) => ValueType::Str,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
            Value::Array(..) => ValueType::Array,
        }
    }

    /// An array of `elem`s from `items` (each must be an `elem`).
    pub fn array(elem: ValueType, items: Vec<Value>) -> Result<Value, String> {
        Array::from_values(elem, items).map(Value::Array)
    }

    /// Any integer type widened to i128 (so every integer fits), else None.
    pub fn as_int(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(v) => v as i128,
            Value::I8(v) => v as i128,
            Value::U16(v) => v as i128,
            Value::I16(v) => v as i128,
            Value::U32(v) => v as i128,
            Value::I32(v) => v as i128,
            Value::U64(v) => v as i128,
            Value::I64(v) => v as i128,
            _ => return None,
        })
    }

    /// Any float type (or integer) as f64.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v as f64),
            Value::F64(v) => Some(v),
            _ => self.as_int().map(|v| v as f64),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Heap bytes held beyond the `Value` itself.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Value::Str(s) => s.capacity(),
            Value::Array(a) => a.heap_bytes(),
            _ => 0,
        }
    }

    /// A short human rendering: scalars in full, long arrays summarised.
    pub fn summary(&self) -> String {
        match self {
            Value::Str(s) if s.len() > 60 => {
                let mut cut = 60;
                while !s.is_char_boundary(cut) {
                    cut -= 1;
                }
                format!("{:?}… ({} bytes)", &s[..cut], s.len())
            }
            Value::Str(s) => format!("{s:?}"),
            Value::Array(a) if a.len() > 4 => {
                format!("[{}; {}]", a.elem_type().name(), a.len())
            }
            Value::Array(a) => {
                let parts: Vec<String> = (0..a.len())
                    .filter_map(|i| a.get(i))
                    .map(|v| v.summary())
                    .collect();
                format!("[{}]", parts.join(", "))
            }
            Value::Bool(b) => b.to_string(),
            Value::F32(v) => v.to_string(),
            Value::F64(v) => v.to_string(),
            v => v.as_int().map(|i| i.to_string()).unwrap_or_default(),
        }
    }
}
