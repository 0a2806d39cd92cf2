//! What the host must know about a kernel, read from naga's module of it:
//! its bindings, its overrides, the layouts of the structs Rust mirrors, and
//! the constants the host mirrors (marked `/// host: PATH` in the WGSL).

use naga::{AddressSpace, ArraySize, Expression, Literal, Module, ScalarKind, TypeInner};

use super::source::Source;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Uniform,
    Read,
    Write,
}

#[derive(PartialEq, Eq, Debug)]
pub struct Binding {
    pub slot: u32,
    pub name: String,
    pub kind: Kind,
    /// The part that declares it (0: the kernel's own file).
    pub part: usize,
    pub at: String,
}

pub struct Override {
    pub name: String,
    /// Its Rust type: `bool`, `u32`, `i32` or `f32`.
    pub ty: &'static str,
    pub at: String,
}

pub struct Member {
    pub name: String,
    pub offset: u32,
    pub size: u32,
    /// The Rust type with this WGSL type's layout (`[f32; 4]` for vec4<f32>).
    pub rust: String,
}

pub struct Layout {
    pub wgsl: String,
    /// The mirroring struct's path under `crate::`.
    pub rust: String,
    pub size: u32,
    pub members: Vec<Member>,
    pub at: String,
}

/// A WGSL constant the host has a twin of.
pub struct Mirror {
    pub wgsl: String,
    pub value: String,
    pub rust: String,
    pub at: String,
}

pub struct Table {
    pub bindings: Vec<Binding>,
    /// Host-set overrides (those the manifest gives values for), in
    /// manifest order.
    pub overrides: Vec<Override>,
    pub structs: Vec<Layout>,
    pub mirrors: Vec<Mirror>,
}

pub fn read(src: &Source, module: &Module) -> Result<Table, String> {
    Ok(Table {
        bindings: bindings(src, module)?,
        overrides: overrides(src, module)?,
        structs: src
            .k
            .structs
            .iter()
            .map(|(wgsl, rust)| layout(src, module, wgsl, rust))
            .collect::<Result<_, _>>()?,
        mirrors: mirrors(src, module)?,
    })
}

fn bindings(src: &Source, module: &Module) -> Result<Vec<Binding>, String> {
    let mut out = Vec::new();
    for (h, var) in module.global_variables.iter() {
        let Some(rb) = &var.binding else { continue };
        let (part, at) = src.place(
            module
                .global_variables
                .get_span(h)
                .location(&src.text)
                .line_number as usize,
        );
        let name = var.name.clone().unwrap_or_default();
        let kind = match var.space {
            AddressSpace::Uniform => Kind::Uniform,
            AddressSpace::Storage { access } if access.contains(naga::StorageAccess::STORE) => {
                Kind::Write
            }
            AddressSpace::Storage { .. } => Kind::Read,
            _ => return Err(format!("{at}: error: `{name}`: only buffers are bound")),
        };
        let Some(part) = part.filter(|_| rb.group == 0) else {
            return Err(format!(
                "{at}: error: `{name}`: bindings are in group 0 of a kernel part"
            ));
        };
        out.push(Binding {
            slot: rb.binding,
            name,
            kind,
            part,
            at,
        });
    }
    out.sort_by_key(|b| b.slot);
    if let Some(w) = out.windows(2).find(|w| w[0].slot == w[1].slot) {
        return Err(format!(
            "{}: error: binding {} is declared twice",
            w[1].at, w[1].slot
        ));
    }
    Ok(out)
}

fn overrides(src: &Source, module: &Module) -> Result<Vec<Override>, String> {
    let mut out = Vec::new();
    for (name, _) in src.k.overrides {
        let found = module
            .overrides
            .iter()
            .find(|(_, o)| o.name.as_deref() == Some(*name));
        let Some((h, o)) = found else {
            return Err(format!(
                "build/manifest.rs: error: kernel {} sets override {name}, which its WGSL does not declare",
                src.k.name
            ));
        };
        let at = src.at(module.overrides.get_span(h));
        let ty = match module.types[o.ty].inner {
            TypeInner::Scalar(s) => match s.kind {
                ScalarKind::Bool => "bool",
                ScalarKind::Uint => "u32",
                ScalarKind::Sint => "i32",
                _ => "f32",
            },
            _ => return Err(format!("{at}: error: override {name} is not a scalar")),
        };
        out.push(Override {
            name: name.to_string(),
            ty,
            at,
        });
    }
    for (h, o) in module.overrides.iter() {
        let set = src
            .k
            .overrides
            .iter()
            .any(|(n, _)| o.name.as_deref() == Some(n));
        if !set && o.init.is_none() {
            return Err(format!(
                "{}: error: override {} has no default and build/manifest.rs gives it no values",
                src.at(module.overrides.get_span(h)),
                o.name.as_deref().unwrap_or("?")
            ));
        }
    }
    Ok(out)
}

fn scalar_type(s: naga::Scalar) -> Option<&'static str> {
    Some(match (s.kind, s.width) {
        (ScalarKind::Uint, 4) => "u32",
        (ScalarKind::Sint, 4) => "i32",
        (ScalarKind::Float, 4) => "f32",
        (ScalarKind::Float, 2) => "half::f16",
        _ => return None,
    })
}

/// The Rust type laid out as WGSL lays out `ty` (host-shareable types only).
fn rust_type(module: &Module, ty: naga::Handle<naga::Type>) -> Option<String> {
    Some(match module.types[ty].inner {
        TypeInner::Scalar(s) => scalar_type(s)?.into(),
        TypeInner::Vector { size, scalar } => format!("[{}; {}]", scalar_type(scalar)?, size as u8),
        TypeInner::Array {
            base,
            size: ArraySize::Constant(n),
            stride,
        } if stride == module.types[base].inner.size(module.to_ctx()) => {
            format!("[{}; {n}]", rust_type(module, base)?)
        }
        _ => return None,
    })
}

fn layout(src: &Source, module: &Module, wgsl: &str, rust: &str) -> Result<Layout, String> {
    let found = module
        .types
        .iter()
        .find(|(_, t)| t.name.as_deref() == Some(wgsl));
    let Some((h, ty)) = found else {
        return Err(format!(
            "build/manifest.rs: error: kernel {}: its WGSL has no struct {wgsl} (for {rust})",
            src.k.name
        ));
    };
    let at = src.at(module.types.get_span(h));
    let TypeInner::Struct { members, span } = &ty.inner else {
        return Err(format!("{at}: error: {wgsl} is not a struct"));
    };
    let mut out = Vec::new();
    for m in members {
        let name = m.name.clone().unwrap_or_default();
        let Some(rust) = rust_type(module, m.ty) else {
            return Err(format!(
                "{at}: error: {wgsl}.{name}: no Rust type lays out like it (scalars, vectors and fixed arrays of them)"
            ));
        };
        out.push(Member {
            name,
            offset: m.offset,
            size: module.types[m.ty].inner.size(module.to_ctx()),
            rust,
        });
    }
    Ok(Layout {
        wgsl: wgsl.into(),
        rust: rust.into(),
        size: *span,
        members: out,
        at,
    })
}

/// Constants whose doc comment has a line `host: PATH` (PATH under
/// `crate::`), with their values. (Read from the text: naga drops the doc
/// comment of a file's first declaration.)
fn mirrors(src: &Source, module: &Module) -> Result<Vec<Mirror>, String> {
    let mut out = Vec::new();
    let mut pending: Option<&str> = None;
    for line in src.text.lines() {
        let line = line.trim();
        if let Some(path) = line.strip_prefix("/// host:") {
            pending = Some(path.trim().trim_end_matches('.'));
            continue;
        }
        if line.starts_with("///") {
            continue;
        }
        let Some(rust) = pending.take() else { continue };
        let name = line
            .strip_prefix("const ")
            .and_then(|l| l.split([':', '=', ' ']).next());
        let found = name.and_then(|n| {
            module
                .constants
                .iter()
                .find(|(_, c)| c.name.as_deref() == Some(n))
        });
        let Some((h, c)) = found else {
            return Err(format!(
                "kernel {}: error: `/// host: {rust}` must precede a `const` declaration, not `{line}`",
                src.k.name
            ));
        };
        let at = src.at(module.constants.get_span(h));
        let value = match module.global_expressions[c.init] {
            Expression::Literal(Literal::U32(v)) => v.to_string(),
            Expression::Literal(Literal::I32(v)) => v.to_string(),
            Expression::Literal(Literal::AbstractInt(v)) => v.to_string(),
            _ => {
                return Err(format!(
                    "{at}: error: a mirrored constant must be an integer"
                ))
            }
        };
        out.push(Mirror {
            wgsl: c.name.clone().unwrap_or_default(),
            value,
            rust: rust.to_string(),
            at,
        });
    }
    Ok(out)
}
