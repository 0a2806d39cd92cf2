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

fn main() {
    let dir = Path::new("shaders");
    println!("cargo:rerun-if-changed=shaders");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut kernels: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("shaders/ exists")
        .map(|e| e.expect("readable dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wgsl"))
        .filter(|p| {
            !p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("prelude_")
        })
        .collect();
    kernels.sort();
    let mut failures = Vec::new();
    for prelude in &PRELUDES {
        let pre_src = std::fs::read_to_string(dir.join(prelude.file)).expect("prelude exists");
        for k in &kernels {
            println!("cargo:rerun-if-changed={}", k.display());
            let src = std::fs::read_to_string(k).expect("readable kernel");
            if let Err(msg) = check(&pre_src, prelude, &src, k, &out_dir) {
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

/// Parse + validate + translate one (prelude, kernel) pairing.
fn check(
    pre: &str,
    prelude: &Prelude,
    kernel: &str,
    path: &Path,
    out_dir: &Path,
) -> Result<(), String> {
    // The prelude goes after the kernel so that kernel line numbers in naga's
    // messages are the file's own; WGSL module declarations are order-free.
    let src = format!("{kernel}\n{pre}");
    let kernel_lines = kernel.lines().count() + 1;
    let name = path.display().to_string();
    let locate = |line: usize| -> String {
        if line <= kernel_lines {
            format!("{name}:{line}")
        } else {
            format!(
                "shaders/{}:{} (prelude, with {name})",
                prelude.file,
                line - kernel_lines
            )
        }
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
            e.emit_to_string_with_path(&src, &name)
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
                e.emit_to_string_with_path(&src, &name)
            )
        })?;
    let (module, info) = naga::back::pipeline_constants::process_overrides(
        &module,
        &info,
        None,
        &naga::back::PipelineConstants::default(),
    )
    .map_err(|e| format!("{name}: error: override processing: {e}"))?;
    let stem = format!(
        "{}.{}",
        path.file_stem().unwrap().to_string_lossy(),
        prelude
            .file
            .trim_start_matches("prelude_")
            .trim_end_matches(".wgsl")
    );
    let msl_opts = msl::Options {
        lang_version: (2, 4),
        ..Default::default()
    };
    let (msl_src, _) =
        msl::write_string(&module, &info, &msl_opts, &msl::PipelineOptions::default())
            .map_err(|e| format!("{name}: error: MSL translation with {}: {e}", prelude.file))?;
    std::fs::write(out_dir.join(format!("{stem}.metal")), msl_src).expect("write OUT_DIR");
    let spv_opts = spv::Options {
        lang_version: (1, 3),
        ..Default::default()
    };
    let words = spv::write_vec(&module, &info, &spv_opts, None).map_err(|e| {
        format!(
            "{name}: error: SPIR-V translation with {}: {e}",
            prelude.file
        )
    })?;
    std::fs::write(out_dir.join(format!("{stem}.spv")), bytemuck_words(&words))
        .expect("write OUT_DIR");
    Ok(())
}

fn bytemuck_words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}
