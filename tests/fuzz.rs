//! A mutation fuzz run (issue 12), bounded for CI: the tiny synthetic model
//! is mutated (byte flips, truncations, metadata values set to edge values)
//! with a fixed seed, and every mutant goes through the GGUF reader, the
//! model config and weights, the tokenizer and one token of the CPU
//! reference; the first few that load also go through the GPU engine on
//! the test adapter. A panic anywhere, or a mutant that takes longer than
//! `CASE_LIMIT`, fails the test. Errors are the expected outcome.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use glmw::engine::{Engine, EngineOptions};
use glmw::gguf::{Array, GgufFile, GgufWriter, TensorSpec, Value, ValueType};
use glmw::model::Model;
use glmw::reference::{MlaForm, Reference};
use glmw::tokenizer::Tokenizer;

/// Mutants per kind (of the tiny model, then of its all-dense variant), and
/// how many loadable ones of each seed also run on the GPU.
const BYTE_FLIPS: usize = 400;
const TRUNCATIONS: usize = 100;
const VALUE_EDITS: [usize; 2] = [500, 200];
const GPU_CASES: usize = 8;
/// The longest one mutant may take before it counts as a hang.
const CASE_LIMIT: Duration = Duration::from_secs(60);

/// xorshift64*: the run is the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The values every metadata edit picks from: counts and floats at their
/// edges, and values of the wrong type.
fn edge_values() -> Vec<Value> {
    vec![
        Value::U32(0),
        Value::U32(1),
        Value::U32(2),
        Value::U32(3),
        Value::U32(u32::MAX),
        Value::U32(1 << 31),
        Value::U32(1 << 16),
        Value::U64(u64::MAX),
        Value::I32(-1),
        Value::I32(i32::MIN),
        Value::F32(f32::NAN),
        Value::F32(f32::INFINITY),
        Value::F32(f32::NEG_INFINITY),
        Value::F32(-1.0),
        Value::F32(0.0),
        Value::F32(1e30),
        Value::Bool(true),
        Value::Str(String::new()),
        Value::Str("yarn".into()),
        Value::Array(Array::new(ValueType::U8)),
        Value::Array(Array::Str(["", "<|user|>"].into_iter().collect())),
        Value::Array(Array::I32(vec![-1, 1 << 30])),
    ]
}

/// The seed file, its header length and its parsed form.
struct Seed {
    bytes: Vec<u8>,
    file: GgufFile,
}

impl Seed {
    fn header_len(&self) -> usize {
        self.file.data_offset as usize
    }

    /// The seed rewritten with metadata `md` (its tensors unchanged).
    fn with_metadata(&self, md: &[(String, Value)]) -> Option<Vec<u8>> {
        let specs: Vec<TensorSpec> = self
            .file
            .tensors()
            .iter()
            .map(|t| TensorSpec::new(t.name.clone(), &t.dims, t.ggml_type))
            .collect();
        // A metadata set the writer refuses is not a file: skip it.
        let mut w = GgufWriter::new(Vec::new(), "fuzz".into(), md, &specs).ok()?;
        for t in self.file.tensors() {
            w.write_data(self.file.tensor_data(t)).ok()?;
        }
        w.finish().ok()
    }
}

/// Byte flip `i` of `seed`: one to four bits, mostly in the header, where
/// a flip changes structure, not weights.
fn flip_mutant(seed: &Seed, rng: &mut Rng, i: usize) -> (String, Vec<u8>) {
    let mut b = seed.bytes.clone();
    let hl = seed.header_len();
    for _ in 0..1 + rng.below(4) {
        let at = if rng.below(8) == 0 {
            rng.below(b.len())
        } else {
            rng.below(hl)
        };
        b[at] ^= 1 << rng.below(8);
    }
    (format!("flip {i}"), b)
}

/// Truncation `i` of `seed`: into the header (even i) or anywhere.
fn truncation(seed: &Seed, rng: &mut Rng, i: usize) -> (String, Vec<u8>) {
    let len = if i % 2 == 0 {
        rng.below(seed.header_len())
    } else {
        rng.below(seed.bytes.len())
    };
    (format!("truncate to {len}"), seed.bytes[..len].to_vec())
}

/// `seed` with one or two metadata values set to edge values, or None
/// where the writer refuses that metadata.
fn value_mutant(seed: &Seed, rng: &mut Rng, edges: &[Value]) -> Option<(String, Vec<u8>)> {
    let mut m = seed.file.metadata().to_vec();
    let mut name = String::new();
    for _ in 0..1 + rng.below(2) {
        let k = rng.below(m.len());
        let v = edges[rng.below(edges.len())].clone();
        name += &format!("{} = {}; ", m[k].0, v.summary());
        m[k].1 = v;
    }
    Some((name, seed.with_metadata(&m)?))
}

/// Everything the CPU side does with a file. `Some(model)` when it loads.
fn cpu_case(bytes: Vec<u8>) -> Option<Model> {
    let file = GgufFile::from_bytes(bytes).ok()?;
    for (_, v) in file.metadata() {
        let _ = v.summary();
    }
    let _ = Tokenizer::from_gguf(&file).map(|t| t.encode("<|user|>hi there", true));
    let model = Model::from_gguf(file).ok()?;
    let mut r = Reference::new(&model, 4, MlaForm::Absorbed);
    let _ = r.forward(1);
    Some(model)
}

fn gpu_case(model: &Model) {
    let opts = EngineOptions {
        n_ctx: 32,
        ubatch: 4,
        ..Default::default()
    };
    if let Ok(mut e) = Engine::load(model, common::gpu(), opts, &mut |_, _| {}) {
        let _ = e.prefill(&[1, 2]);
        let _ = e.step(3);
    }
}

/// Run `f` on a thread of its own: a panic or a run past `CASE_LIMIT`
/// fails the fuzz run, naming the mutant.
fn guarded<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(CASE_LIMIT) {
        Ok(Ok(v)) => v,
        Ok(Err(_)) => panic!("mutant {name:?} panicked"),
        Err(_) => panic!("mutant {name:?} ran past {CASE_LIMIT:?} (a hang?)"),
    }
}

fn seed(path: &std::path::Path) -> Seed {
    let bytes = std::fs::read(path).unwrap();
    Seed {
        file: GgufFile::from_bytes(bytes.clone()).unwrap(),
        bytes,
    }
}

/// Mutants run and what became of them.
#[derive(Default)]
struct Tally {
    n: usize,
    loaded: usize,
    on_gpu: usize,
}

impl Tally {
    /// One mutant through the CPU side, and through the GPU engine too
    /// where `gpu` still allows and it loads.
    fn run(&mut self, (name, bytes): (String, Vec<u8>), gpu: &mut usize) {
        self.n += 1;
        let label = name.clone();
        let Some(model) = guarded(&name, move || cpu_case(bytes)) else {
            return;
        };
        self.loaded += 1;
        if *gpu > 0 {
            *gpu -= 1;
            self.on_gpu += 1;
            guarded(&label, move || gpu_case(&model));
        }
    }
}

// Each mutant is made just before it runs: the seed is ~2.7 MB, so the
// whole set held at once would take gigabytes.
#[test]
fn mutated_files_never_panic_or_hang() {
    let start = Instant::now();
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let mut t = Tally::default();
    let edges = edge_values();
    let seeds = [seed(common::tiny_model()), seed(&common::all_dense(|_| {}))];
    for (si, seed) in seeds.iter().enumerate() {
        // Edited hyperparameters that pass the checks are what the GPU
        // plans size buffers from.
        let mut gpu_left = GPU_CASES;
        for _ in 0..VALUE_EDITS[si] {
            if let Some(m) = value_mutant(seed, &mut rng, &edges) {
                t.run(m, &mut gpu_left);
            }
        }
        if si == 0 {
            for i in 0..BYTE_FLIPS {
                t.run(flip_mutant(seed, &mut rng, i), &mut 0);
            }
            for i in 0..TRUNCATIONS {
                t.run(truncation(seed, &mut rng, i), &mut 0);
            }
        }
    }
    eprintln!(
        "fuzz: {} mutants, {} loaded, {} on the GPU, {:.1} s",
        t.n,
        t.loaded,
        t.on_gpu,
        start.elapsed().as_secs_f64()
    );
    assert!(t.on_gpu > 0, "no mutant loaded: the GPU path went untested");
}
