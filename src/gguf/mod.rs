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
        Self::ALL.iter().position(|t| *t == self).unwrap() as u32
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

/// One metadata value. Arrays carry their element type so that an empty
/// array still round-trips.
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
    Array(ValueType, Vec<Value>),
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
            Value::Array(t, items) if items.len() > 4 => {
                format!("[{}; {}]", t.name(), items.len())
            }
            Value::Array(_, items) => {
                let parts: Vec<String> = items.iter().map(|v| v.summary()).collect();
                format!("[{}]", parts.join(", "))
            }
            Value::Bool(b) => b.to_string(),
            Value::F32(v) => v.to_string(),
            Value::F64(v) => v.to_string(),
            v => v.as_int().map(|i| i.to_string()).unwrap_or_default(),
        }
    }
}
