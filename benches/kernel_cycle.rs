//! `cargo bench --bench kernel_cycle -- [model.gguf]`: what a token adds to
//! its kernels (docs/perf-journal.md, session 9). The MoE blocks' dispatches
//! are replayed in chosen orders inside one pass and timed: token order,
//! op-major (op 1 of every block, then op 2, …), each op alone, prefixes of
//! the block and the token without one op. On an H100 a block in token
//! order cost ~33 µs more than op-major, growing with the code of the
//! kernels the block cycles through: measure a kernel change here before
//! the token. Without a path it runs on the tiny synthetic model.

mod common;

use glmw::bench;
use glmw::engine::{Engine, EngineOptions};
use glmw::model::Model;

/// µs per replay of `idx`, median of five passes of `reps` replays.
fn time(e: &mut Engine, idx: &[usize], reps: usize) -> f64 {
    let v: Vec<f64> = (0..5)
        .map(|_| e.time_dispatches(idx, reps).expect("time") / 1e3 / reps as f64)
        .collect();
    bench::stats(&v).median
}

fn main() {
    // The model named on the command line, else the tiny one (kept until
    // the end: dropping it deletes the file).
    let arg = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let tiny = arg.is_none().then(|| common::TinyFile::new("cycle"));
    let path = arg.map_or_else(|| tiny.as_ref().unwrap().path.clone(), Into::into);
    let model = Model::open(&path).expect("open the model");
    let gpu = common::gpu();
    let opts = EngineOptions {
        n_ctx: 1024,
        ..Default::default()
    };
    let mut e = Engine::load(&model, &gpu, opts, &mut |_, _| {}).expect("load");
    let blocks: Vec<_> = e.blocks().iter().filter(|b| b.moe).cloned().collect();
    let Some(first) = blocks.first() else {
        println!("no MoE blocks");
        return;
    };
    let (nb, len) = (blocks.len(), first.ffn.end - first.attn.start);
    // Full clock first: an idle GPU drops it (journal, session 8).
    bench::model::warm_up(&mut e, 1).expect("warm up");
    e.jump_to(300.min(e.n_ctx() - 2)).expect("position");
    let per_block = |e: &mut Engine, ops: &dyn Fn(usize) -> bool| -> f64 {
        let idx: Vec<usize> = blocks
            .iter()
            .flat_map(|b| (0..len).filter(|&o| ops(o)).map(move |o| b.attn.start + o))
            .collect();
        time(e, &idx, 3) / nb as f64
    };
    let token = per_block(&mut e, &|_| true);
    let major: Vec<usize> = (0..len)
        .flat_map(|o| blocks.iter().map(move |b| b.attn.start + o))
        .collect();
    let op_major = time(&mut e, &major, 3) / nb as f64;
    println!("{nb} MoE blocks, µs a block: token order {token:.1}, op-major {op_major:.1}");
    let alone: Vec<f64> = (0..len).map(|o| per_block(&mut e, &|p| p == o)).collect();
    println!("   op                        kernel             alone  token without it");
    for (o, a) in alone.iter().enumerate() {
        let (op, kernel, _) = e.dispatch_info(first.attn.start + o);
        let without = per_block(&mut e, &|p| p != o);
        println!("{o:3} {op:26} {kernel:18} {a:6.2} {:6.2}", token - without);
    }
    println!("sum alone {:.1}", alone.iter().sum::<f64>());
    for k in 2..=len {
        let t = per_block(&mut e, &|p| p < k);
        let sum: f64 = alone[..k].iter().sum();
        println!(
            "ops 0..{k:<2} in token order {t:6.2} = alone {sum:6.2} {:+6.2}",
            t - sum
        );
    }
}
