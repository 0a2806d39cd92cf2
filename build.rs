//! Validates every kernel in shaders/ with naga, once per reduction prelude
//! (subgroup and shared-memory), and translates each pairing to MSL and
//! SPIR-V, so a shader that would fail on Metal or Vulkan fails the build on
//! any machine, with the kernel's own file:line.

use std::path::{Path, PathBuf};

use naga::back::{msl, spv};
use naga::valid::{Capabilities, ValidationFlags, Validator};

struct Prelude {
    file: &'static str,
    caps: Capabilities,
}

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

include!("src/gpu/manifest.rs");

fn main() {
    let dir = Path::new("shaders");
    println!("cargo:rerun-if-changed=shaders");
    println!("cargo:rerun-if-changed=src/gpu/manifest.rs");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut failures = orphans(dir);
    for prelude in &PRELUDES {
        let pre_src = std::fs::read_to_string(dir.join(prelude.file)).expect("prelude exists");
        for k in KERNELS {
            let mut src = String::new();
            let mut files = Vec::new();
            for part in k.parts {
                let text = std::fs::read_to_string(dir.join(part))
                    .unwrap_or_else(|e| panic!("shaders/{part} (kernel {}): {e}", k.name));
                files.push((format!("shaders/{part}"), text.lines().count() + 1));
                src.push_str(&text);
                src.push('\n');
            }
            if let Err(msg) = check(&pre_src, prelude, &src, &files, k, &out_dir) {
                failures.push(msg);
            }
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
                "shaders/{name}: not used by any kernel in src/gpu/manifest.rs"
            ));
        }
    }
    out
}

/// Every combination of the kernel's override values.
fn override_sets(k: &KernelDef) -> Vec<naga::back::PipelineConstants> {
    let mut sets = vec![naga::back::PipelineConstants::default()];
    for (name, values) in k.overrides {
        sets = sets
            .into_iter()
            .flat_map(|s| {
                values.iter().map(move |v| {
                    let mut s = s.clone();
                    s.insert(name.to_string(), *v);
                    s
                })
            })
            .collect();
    }
    sets
}

/// Parse + validate + translate one (prelude, kernel) pairing, the
/// translation once per combination of override values.
fn check(
    pre: &str,
    prelude: &Prelude,
    kernel: &str,
    files: &[(String, usize)],
    k: &KernelDef,
    out_dir: &Path,
) -> Result<(), String> {
    // The prelude goes after the kernel so that kernel line numbers in naga's
    // messages are the files' own; WGSL module declarations are order-free.
    let src = format!("{kernel}\n{pre}");
    let name = k.name;
    let locate = |line: usize| -> String {
        let mut first = 1;
        for (file, n) in files {
            if line < first + n {
                return format!("{file}:{} (kernel {name})", line + 1 - first);
            }
            first += n;
        }
        format!(
            "shaders/{}:{} (prelude, kernel {name})",
            prelude.file,
            line + 1 - first
        )
    };
    let module = naga::front::wgsl::parse_str(&src).map_err(|e| {
        let line = e
            .location(&src)
            .map(|l| l.line_number as usize)
            .unwrap_or(0);
        format!(
            "{}: error: {}\n{}",
            locate(line),
            e.message(),
            e.emit_to_string_with_path(&src, name)
        )
    })?;
    let info = Validator::new(ValidationFlags::all(), prelude.caps)
        .validate(&module)
        .map_err(|e| {
            let line = e
                .location(&src)
                .map(|l| l.line_number as usize)
                .unwrap_or(0);
            format!(
                "{}: error: validation with {} failed: {}\n{}",
                locate(line),
                prelude.file,
                e.as_inner(),
                e.emit_to_string_with_path(&src, name)
            )
        })?;
    let variant = prelude
        .file
        .trim_start_matches("prelude_")
        .trim_end_matches(".wgsl");
    for (i, consts) in override_sets(k).iter().enumerate() {
        let (module, info) =
            naga::back::pipeline_constants::process_overrides(&module, &info, None, consts)
                .map_err(|e| format!("{name}: error: override processing {consts:?}: {e}"))?;
        let stem = format!("{name}.{variant}.{i}");
        let msl_opts = msl::Options {
            lang_version: (2, 4),
            ..Default::default()
        };
        let (msl_src, _) =
            msl::write_string(&module, &info, &msl_opts, &msl::PipelineOptions::default())
                .map_err(|e| {
                    format!(
                        "{name}: error: MSL translation with {} {consts:?}: {e}",
                        prelude.file
                    )
                })?;
        std::fs::write(out_dir.join(format!("{stem}.metal")), msl_src).expect("write OUT_DIR");
        let spv_opts = spv::Options {
            lang_version: (1, 3),
            ..Default::default()
        };
        let words = spv::write_vec(&module, &info, &spv_opts, None).map_err(|e| {
            format!(
                "{name}: error: SPIR-V translation with {} {consts:?}: {e}",
                prelude.file
            )
        })?;
        std::fs::write(out_dir.join(format!("{stem}.spv")), bytemuck_words(&words))
            .expect("write OUT_DIR");
    }
    Ok(())
}

fn bytemuck_words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}
