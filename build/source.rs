//! One kernel's WGSL as naga sees it: its parts concatenated, then a
//! reduction prelude; parsing, validation and translation, with every
//! error mapped back to the part's own file and line.

use std::path::Path;

use naga::back::{msl, spv};
use naga::valid::{Capabilities, ModuleInfo, ValidationFlags, Validator};

use super::KernelDef;

pub struct Prelude {
    pub file: &'static str,
    pub caps: Capabilities,
}

/// A kernel's parts followed by one prelude, and where each file's lines
/// start in the concatenation.
pub struct Source<'a> {
    pub k: &'a KernelDef,
    pub prelude: &'a Prelude,
    pub text: String,
    /// (path, lines) of each part, in order.
    files: Vec<(String, usize)>,
}

impl<'a> Source<'a> {
    /// The prelude goes after the parts so that naga's line numbers within
    /// the first part are the file's own; WGSL declarations are order-free.
    pub fn new(dir: &Path, k: &'a KernelDef, prelude: &'a Prelude) -> Source<'a> {
        let mut text = String::new();
        let mut files = Vec::new();
        for part in k.parts {
            let part_text = std::fs::read_to_string(dir.join(part))
                .unwrap_or_else(|e| panic!("shaders/{part} (kernel {}): {e}", k.name));
            files.push((format!("shaders/{part}"), part_text.lines().count() + 1));
            text.push_str(&part_text);
            text.push('\n');
        }
        text.push('\n');
        text.push_str(&std::fs::read_to_string(dir.join(prelude.file)).expect("prelude exists"));
        Source {
            k,
            prelude,
            text,
            files,
        }
    }

    /// (index of the part, or None for the prelude; `file:line`) of a
    /// 1-based line of the concatenation.
    pub fn place(&self, line: usize) -> (Option<usize>, String) {
        let mut first = 1;
        for (i, (file, n)) in self.files.iter().enumerate() {
            if line < first + n {
                return (Some(i), format!("{file}:{}", line + 1 - first));
            }
            first += n;
        }
        let file = self.prelude.file;
        (None, format!("shaders/{file}:{}", line + 1 - first))
    }

    /// `file:line` of a span.
    pub fn at(&self, span: naga::Span) -> String {
        self.place(span.location(&self.text).line_number as usize).1
    }

    fn error_at(&self, line: Option<u32>) -> String {
        let place = self.place(line.unwrap_or(0) as usize).1;
        format!("{place} (kernel {})", self.k.name)
    }

    /// The prelude's capabilities; a kernel that enables cooperative
    /// matrices (matmul_coop.wgsl) runs only on adapters that offer them
    /// and subgroups (`gpu::context::Caps::coop`), so it is validated
    /// with those too, in either prelude.
    fn caps(&self) -> Capabilities {
        let coop = self
            .text
            .starts_with("enable f16;\nenable wgpu_cooperative_matrix;");
        match coop {
            true => {
                self.prelude.caps
                    | Capabilities::COOPERATIVE_MATRIX
                    | Capabilities::SUBGROUP
                    | Capabilities::SUBGROUP_BARRIER
                    | Capabilities::SHADER_FLOAT16
            }
            false => self.prelude.caps,
        }
    }

    /// Parse and validate with the prelude's capabilities.
    pub fn parse(&self) -> Result<(naga::Module, ModuleInfo), String> {
        let name = self.k.name;
        let module = naga::front::wgsl::parse_str(&self.text).map_err(|e| {
            format!(
                "{}: error: {}\n{}",
                self.error_at(e.location(&self.text).map(|l| l.line_number)),
                e.message(),
                e.emit_to_string_with_path(&self.text, name)
            )
        })?;
        let info = Validator::new(ValidationFlags::all(), self.caps())
            .validate(&module)
            .map_err(|e| {
                format!(
                    "{}: error: validation with {} failed: {}\n{}",
                    self.error_at(e.location(&self.text).map(|l| l.line_number)),
                    self.prelude.file,
                    e.as_inner(),
                    e.emit_to_string_with_path(&self.text, name)
                )
            })?;
        Ok((module, info))
    }

    /// Translate to MSL and SPIR-V once per combination of override values,
    /// writing each into `out_dir`.
    pub fn translate(
        &self,
        module: &naga::Module,
        info: &ModuleInfo,
        out_dir: &Path,
    ) -> Result<(), String> {
        let (name, pre) = (self.k.name, self.prelude.file);
        let variant = pre.trim_start_matches("prelude_").trim_end_matches(".wgsl");
        for (i, consts) in override_sets(self.k).iter().enumerate() {
            let (module, info) =
                naga::back::pipeline_constants::process_overrides(module, info, None, consts)
                    .map_err(|e| format!("{name}: error: override processing {consts:?}: {e}"))?;
            let stem = format!("{name}.{variant}.{i}");
            let msl_opts = msl::Options {
                lang_version: (2, 4),
                ..Default::default()
            };
            let (msl_src, _) =
                msl::write_string(&module, &info, &msl_opts, &msl::PipelineOptions::default())
                    .map_err(|e| {
                        format!("{name}: error: MSL translation with {pre} {consts:?}: {e}")
                    })?;
            std::fs::write(out_dir.join(format!("{stem}.metal")), msl_src).expect("write OUT_DIR");
            let spv_opts = spv::Options {
                lang_version: (1, 3),
                ..Default::default()
            };
            let words = spv::write_vec(&module, &info, &spv_opts, None).map_err(|e| {
                format!("{name}: error: SPIR-V translation with {pre} {consts:?}: {e}")
            })?;
            let bytes: Vec<u8> = words.iter().flat_map(|x| x.to_le_bytes()).collect();
            std::fs::write(out_dir.join(format!("{stem}.spv")), bytes).expect("write OUT_DIR");
        }
        Ok(())
    }
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
