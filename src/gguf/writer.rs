//! Streaming GGUF writer: the header (metadata and tensor table) is written
//! up front from the tensor specs, then tensor data is streamed in order in
//! chunks of any size, so memory stays constant even for a 17 GB model.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use super::reader::align_up;
use super::{Array, Value, DEFAULT_ALIGNMENT};
use crate::error::{Error, Result};
use crate::quant::GgmlType;

/// A tensor to be written: name, dims (ne0 first) and type.
#[derive(Clone, Debug)]
pub struct TensorSpec {
    pub name: String,
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
}

impl TensorSpec {
    pub fn new(name: impl Into<String>, dims: &[u64], ggml_type: GgmlType) -> TensorSpec {
        TensorSpec {
            name: name.into(),
            dims: dims.to_vec(),
            ggml_type,
        }
    }
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }
    pub fn n_bytes(&self) -> Result<u64> {
        let rows = self.n_elements() / self.dims.first().copied().unwrap_or(1).max(1);
        self.ggml_type
            .row_bytes(self.dims[0])
            .map(|r| r * rows)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "tensor {}: ne0 {} is not a multiple of the {} block size",
                    self.name, self.dims[0], self.ggml_type
                ))
            })
    }
}

pub struct GgufWriter<W: Write> {
    out: W,
    path: String,
    sizes: Vec<(String, u64)>,
    alignment: u64,
    /// Index of the tensor being written and bytes of it written so far.
    current: usize,
    written: u64,
}

impl GgufWriter<BufWriter<File>> {
    /// Create `path` and write the header. `general.alignment` is taken from
    /// `metadata` when present.
    pub fn create(
        path: impl AsRef<Path>,
        metadata: &[(String, Value)],
        tensors: &[TensorSpec],
    ) -> Result<Self> {
        let shown = path.as_ref().display().to_string();
        let f = File::create(path.as_ref()).map_err(|e| Error::io(&shown, e))?;
        GgufWriter::new(
            BufWriter::with_capacity(1 << 20, f),
            shown,
            metadata,
            tensors,
        )
    }
}

impl<W: Write> GgufWriter<W> {
    pub fn new(
        out: W,
        path: String,
        metadata: &[(String, Value)],
        tensors: &[TensorSpec],
    ) -> Result<Self> {
        let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
            Some((_, Value::U32(a))) if a.is_power_of_two() => *a as u64,
            Some(_) => {
                return Err(Error::InvalidArgument(
                    "general.alignment must be a u32 power of two".into(),
                ))
            }
            None => DEFAULT_ALIGNMENT as u64,
        };
        let mut w = GgufWriter {
            out,
            path,
            sizes: Vec::new(),
            alignment,
            current: 0,
            written: 0,
        };
        let mut h = Vec::new();
        h.extend_from_slice(b"GGUF");
        h.extend_from_slice(&3u32.to_le_bytes());
        h.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
        h.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
        for (k, v) in metadata {
            put_str(&mut h, k);
            h.extend_from_slice(&v.value_type().id().to_le_bytes());
            put_value(&mut h, v)?;
        }
        let mut offset = 0u64;
        for t in tensors {
            let n = t.n_bytes()?;
            put_str(&mut h, &t.name);
            h.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                h.extend_from_slice(&d.to_le_bytes());
            }
            h.extend_from_slice(&t.ggml_type.id().to_le_bytes());
            h.extend_from_slice(&offset.to_le_bytes());
            w.sizes.push((t.name.clone(), n));
            offset = align_up(offset + n, alignment);
        }
        let pad = align_up(h.len() as u64, alignment) as usize - h.len();
        h.resize(h.len() + pad, 0);
        w.put(&h)?;
        Ok(w)
    }

    fn put(&mut self, b: &[u8]) -> Result<()> {
        self.out.write_all(b).map_err(|e| Error::io(&self.path, e))
    }

    /// Append the next bytes of tensor data. Tensors are filled in the order
    /// of the specs; a tensor may be written in any number of chunks, and
    /// padding to the alignment is inserted when one is complete.
    pub fn write_data(&mut self, mut chunk: &[u8]) -> Result<()> {
        while !chunk.is_empty() {
            let Some((name, size)) = self.sizes.get(self.current).cloned() else {
                return Err(Error::InvalidArgument(
                    "more tensor data written than the specs describe".into(),
                ));
            };
            let n = ((size - self.written) as usize).min(chunk.len());
            self.put(&chunk[..n])?;
            self.written += n as u64;
            chunk = &chunk[n..];
            if self.written == size {
                let pad = (align_up(size, self.alignment) - size) as usize;
                self.put(&vec![0u8; pad])?;
                log::trace!("gguf writer: wrote {name} ({size} bytes)");
                self.current += 1;
                self.written = 0;
            }
        }
        Ok(())
    }

    /// Check every tensor was written in full and flush.
    pub fn finish(mut self) -> Result<W> {
        // A zero-sized tensor cannot exist (dims are positive), so any tensor
        // not yet completed is an error of the caller.
        if self.current != self.sizes.len() {
            let (name, size) = &self.sizes[self.current];
            return Err(Error::InvalidArgument(format!(
                "tensor {name} got {} of its {size} bytes before finish",
                self.written
            )));
        }
        self.out.flush().map_err(|e| Error::io(&self.path, e))?;
        Ok(self.out)
    }
}

fn put_str(h: &mut Vec<u8>, s: &str) {
    h.extend_from_slice(&(s.len() as u64).to_le_bytes());
    h.extend_from_slice(s.as_bytes());
}

fn put_value(h: &mut Vec<u8>, v: &Value) -> Result<()> {
    match v {
        Value::U8(x) => h.push(*x),
        Value::I8(x) => h.push(*x as u8),
        Value::U16(x) => h.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => h.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => h.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => h.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => h.extend_from_slice(&x.to_le_bytes()),
        Value::U64(x) => h.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => h.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => h.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(b) => h.push(*b as u8),
        Value::Str(s) => put_str(h, s),
        Value::Array(a) => put_array(h, a),
    }
    Ok(())
}

fn put_array(h: &mut Vec<u8>, a: &Array) {
    h.extend_from_slice(&a.elem_type().id().to_le_bytes());
    h.extend_from_slice(&(a.len() as u64).to_le_bytes());
    macro_rules! le {
        ($v:expr) => {
            $v.iter()
                .for_each(|x| h.extend_from_slice(&x.to_le_bytes()))
        };
    }
    match a {
        Array::U8(v) => h.extend_from_slice(v),
        Array::I8(v) => le!(v),
        Array::U16(v) => le!(v),
        Array::I16(v) => le!(v),
        Array::U32(v) => le!(v),
        Array::I32(v) => le!(v),
        Array::F32(v) => le!(v),
        Array::U64(v) => le!(v),
        Array::I64(v) => le!(v),
        Array::F64(v) => le!(v),
        Array::Bool(v) => v.iter().for_each(|b| h.push(*b as u8)),
        Array::Str(v) => v.iter().for_each(|s| put_str(h, s)),
        Array::Array(v) => v.iter().for_each(|inner| put_array(h, inner)),
    }
}
