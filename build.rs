//! Validates every kernel in shaders/ with naga, once per reduction prelude
//! (subgroup and shared-memory), and translates each pairing to MSL and
//! SPIR-V, so a shader that would fail on Metal or Vulkan fails the build on
//! any machine, with the kernel's own file:line. From the same modules it
//! generates the kernel table src/gpu/kernels.rs includes (build/emit.rs):
//! bindings, overrides and struct layouts come from the WGSL, not from
//! hand-kept lists.

use std::path::{Path, PathBuf};

use naga::valid::Capabilities;

#[path = "build/emit.rs"]
mod emit;
#[path = "build/source.rs"]
mod source;
#[path = "build/table.rs"]
mod table;

use source::{Prelude, Source};

include!("build/manifest.rs");

const PRELUDES: [Prelude; 2] = [
    Prelude {
        file: "prelude_subgroup.wgsl",
        caps: Capabilities::all(),
    },
    // The fallback must not use subgroup operations: validate without them.
    Prelude {
        file: "prelude_shared.wgsl",
        caps: Capabilities::SHADER_FLOAT16.union(Capabilities::SHADER_FLOAT16_IN_FLOAT32),
    },
];

fn main() {
    let dir = Path::new("shaders");
    println!("cargo:rerun-if-changed=shaders");
    println!("cargo:rerun-if-changed=build");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut failures = orphans(dir);
    let mut tables = Vec::new();
    for k in KERNELS {
        match check(dir, k, &out_dir) {
            Ok(t) => tables.push((k, t)),
            Err(e) => failures.extend(e),
        }
    }
    if !failures.is_empty() {
        for f in &failures {
            eprintln!("{f}");
        }
        panic!(
            "{} shader check(s) failed; see the messages above",
            failures.len()
        );
    }
    std::fs::write(out_dir.join("kernel_table.rs"), emit::generate(&tables))
        .expect("write OUT_DIR");
}

/// Validate and translate `k` with each prelude; its table comes from the
/// first pairing (preludes declare no bindings, overrides or structs).
fn check(dir: &Path, k: &KernelDef, out_dir: &Path) -> Result<table::Table, Vec<String>> {
    let mut failures = Vec::new();
    let mut found = None;
    for prelude in &PRELUDES {
        let src = Source::new(dir, k, prelude);
        let checked = src.parse().and_then(|(module, info)| {
            src.translate(&module, &info, out_dir)?;
            if found.is_none() {
                found = Some(table::read(&src, &module)?);
            }
            Ok(())
        });
        if let Err(e) = checked {
            failures.push(e);
        }
    }
    match found {
        Some(t) if failures.is_empty() => Ok(t),
        _ => Err(failures),
    }
}

/// Every .wgsl file must be a prelude or a part of some kernel.
fn orphans(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("shaders/ exists") {
        let name = e
            .expect("readable dir entry")
            .file_name()
            .to_string_lossy()
            .to_string();
        if name.ends_with(".wgsl")
            && !name.starts_with("prelude_")
            && !KERNELS.iter().any(|k| k.parts.contains(&name.as_str()))
        {
            out.push(format!(
                "shaders/{name}: not used by any kernel in build/manifest.rs"
            ));
        }
    }
    out
}
