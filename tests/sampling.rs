//! The sampler over GPU candidates: reproducible per seed, top-k = 1 is
//! greedy, temperature draws follow the softmax, penalties and min-p, and
//! clear errors for invalid settings; candidates are synthetic. Last, the
//! GPU's pick (pick.wgsl) against the sampler it mirrors.

mod common;

use glmw::engine::{Pick, PickParams};
use glmw::gpu::ops::{self, Dispatch, PickBindings};
use glmw::gpu::Kernel;
use glmw::sample::{Sampler, SamplerOptions};

fn opts(temperature: f32, top_k: usize) -> SamplerOptions {
    SamplerOptions {
        temperature,
        top_k,
        top_p: 1.0,
        min_p: 0.0,
        seed: 7,
        ..Default::default()
    }
}

fn cands(logits: &[f32]) -> Vec<(u32, f32)> {
    logits
        .iter()
        .enumerate()
        .map(|(i, &l)| (i as u32 * 3 + 1, l))
        .collect()
}

#[test]
fn same_seed_same_tokens_and_top_k_1_is_greedy() {
    let c = cands(&[1.0, 0.9, 0.8, 0.5, 0.1]);
    let draw = |seed: u64| -> Vec<u32> {
        let mut s = Sampler::new(SamplerOptions {
            seed,
            ..opts(1.0, 0)
        })
        .unwrap();
        (0..200).map(|_| s.sample(&c).unwrap()).collect()
    };
    assert_eq!(draw(1), draw(1));
    assert_ne!(draw(1), draw(2));
    let mut k1 = Sampler::new(opts(1.5, 1)).unwrap();
    let mut greedy = Sampler::new(opts(0.0, 40)).unwrap();
    assert_eq!(greedy.candidates(), 1);
    for _ in 0..50 {
        assert_eq!(k1.sample(&c).unwrap(), c[0].0);
        assert_eq!(greedy.sample(&c).unwrap(), c[0].0);
    }
}

#[test]
fn temperature_draws_follow_the_softmax() {
    let logits = [2.0f32, 1.0, 0.0, -1.0];
    let c = cands(&logits);
    for t in [0.5f32, 1.0, 2.0] {
        let mut s = Sampler::new(opts(t, 0)).unwrap();
        let n = 40_000;
        let mut counts = [0usize; 4];
        for _ in 0..n {
            let id = s.sample(&c).unwrap();
            counts[c.iter().position(|x| x.0 == id).unwrap()] += 1;
        }
        let z: f64 = logits.iter().map(|&l| (l as f64 / t as f64).exp()).sum();
        for (i, &l) in logits.iter().enumerate() {
            let want = (l as f64 / t as f64).exp() / z;
            let got = counts[i] as f64 / n as f64;
            // ~5 standard deviations of a binomial proportion at n = 40000.
            let tol = 5.0 * (want * (1.0 - want) / n as f64).sqrt() + 1e-3;
            assert!(
                (got - want).abs() < tol,
                "T {t}: token {i}: {got:.4} vs {want:.4}"
            );
        }
    }
}

#[test]
fn penalties_and_min_p() {
    let c = vec![(5u32, 2.0f32), (7, 1.9), (9, -1.0)];
    let greedy = |o: SamplerOptions, seen: &[u32]| {
        let mut s = Sampler::new(o).unwrap();
        seen.iter().for_each(|&t| s.accept(t));
        s.sample(&c).unwrap()
    };
    let g = opts(0.0, 1);
    assert_eq!(greedy(g, &[5]), 5, "no penalty");
    let rep = SamplerOptions {
        repeat_penalty: 1.5,
        ..g
    };
    assert_eq!(greedy(rep, &[5]), 7, "2.0 / 1.5 falls below 1.9");
    assert_eq!(
        Sampler::new(rep).unwrap().candidates(),
        64,
        "penalties need every candidate"
    );
    let pres = SamplerOptions {
        presence_penalty: 0.2,
        ..g
    };
    assert_eq!(greedy(pres, &[5]), 7);
    let freq = SamplerOptions {
        frequency_penalty: 0.06,
        ..g
    };
    assert_eq!(greedy(freq, &[5]), 5, "one occurrence: 1.94 still wins");
    assert_eq!(greedy(freq, &[5, 5]), 7, "two: 1.88 loses");
    let window = SamplerOptions {
        repeat_last_n: 1,
        ..rep
    };
    assert_eq!(greedy(window, &[5, 9]), 5, "5 left the window");
    // min-p 0.5 at T = 1: 7 (e^-0.1 = 0.90 of the best) stays, 9 never drawn.
    let mut s = Sampler::new(SamplerOptions {
        min_p: 0.5,
        ..opts(1.0, 0)
    })
    .unwrap();
    let draws: Vec<u32> = (0..2000).map(|_| s.sample(&c).unwrap()).collect();
    assert!(draws.contains(&7) && !draws.contains(&9));
}

#[test]
fn invalid_settings_are_clear_errors() {
    let bad = [
        (
            SamplerOptions {
                temperature: -0.1,
                ..opts(1.0, 0)
            },
            "temperature",
        ),
        (
            SamplerOptions {
                temperature: f32::NAN,
                ..opts(1.0, 0)
            },
            "temperature",
        ),
        (
            SamplerOptions {
                top_p: 0.0,
                ..opts(1.0, 0)
            },
            "top-p",
        ),
        (
            SamplerOptions {
                top_p: 1.5,
                ..opts(1.0, 0)
            },
            "top-p",
        ),
        (
            SamplerOptions {
                min_p: -0.1,
                ..opts(1.0, 0)
            },
            "min-p",
        ),
        (
            SamplerOptions {
                repeat_penalty: 0.0,
                ..opts(1.0, 0)
            },
            "repeat penalty",
        ),
        (
            SamplerOptions {
                frequency_penalty: f32::INFINITY,
                ..opts(1.0, 0)
            },
            "penalties",
        ),
        (opts(1.0, 65), "top-k"),
    ];
    for (o, needle) in bad {
        let e = Sampler::new(o).err().expect("must be rejected").to_string();
        assert!(e.contains(needle), "{e}");
    }
}

/// Extreme (finite) penalties must not turn logits into infinities, whose
/// softmax is NaN: a tiny repeat penalty boosts both repeated tokens as far
/// as an f32 goes, and the draw is then even between them.
#[test]
fn extreme_penalties_stay_finite() {
    let drawn: Vec<u32> = (0..40)
        .map(|seed| {
            let mut s = Sampler::new(SamplerOptions {
                repeat_penalty: 1e-40,
                repeat_last_n: 8,
                seed,
                ..opts(1.0, 0)
            })
            .unwrap();
            s.accept(4);
            s.accept(7);
            s.sample(&cands(&[3.0, 2.0, 1.0])).unwrap()
        })
        .collect();
    assert!(drawn.iter().all(|&t| t == 4 || t == 7), "{drawn:?}");
    assert!(drawn.contains(&4) && drawn.contains(&7), "{drawn:?}");
}

/// pick.wgsl against `Sampler::sample` with the uniform it drew ahead
/// (`pick_ahead`), on random sorted candidates and settings, in both
/// variants. The kernel works in f32 where the sampler works in f64, so a
/// draw within ~1e-6 of a boundary between two candidates may go either
/// way: at most 1 of 300 may differ.
#[test]
fn gpu_pick_matches_the_sampler() {
    let gpu = common::gpu();
    for pipes in common::pipelines() {
        let mut differ = 0;
        for trial in 0..300u64 {
            let n = 2 + (trial % 63) as usize;
            let mut v = common::randn(n, 2.0, 100 + trial);
            v.sort_by(|a, b| b.total_cmp(a));
            let ids: Vec<u32> = (0..n as u32).map(|i| i * 7 + 3).collect();
            let o = SamplerOptions {
                temperature: [0.3, 0.8, 1.0, 2.0][trial as usize % 4],
                top_k: [0, 5, 40, n][trial as usize % 4].min(64),
                top_p: [1.0, 0.95, 0.5, 0.9][(trial as usize / 4) % 4],
                min_p: [0.0, 0.05, 0.2][trial as usize % 3],
                seed: trial,
                ..Default::default()
            };
            let mut s = Sampler::new(o).unwrap();
            let Some(Pick::Sample(p)) = s.pick_ahead() else {
                panic!("trial {trial}: no sampled pick for {o:?}");
            };
            let c: Vec<(u32, f32)> = ids.iter().cloned().zip(v.iter().cloned()).collect();
            let want = s.sample(&c[..p.k.min(n as u32) as usize].to_vec()).unwrap();
            let p = PickParams {
                k: p.k.min(n as u32),
                ..p
            };
            let pb = gpu.uniform("pick", &p);
            let vb = gpu.storage("cand_v", bytemuck::cast_slice(&v)).unwrap();
            let ib = gpu.storage("cand_i", bytemuck::cast_slice(&ids)).unwrap();
            let tb = gpu.storage("token", bytemuck::bytes_of(&u32::MAX)).unwrap();
            let b = PickBindings {
                p: &pb,
                cand_v: &vb,
                cand_i: &ib,
                token: &tb,
            };
            let d = Dispatch::new(gpu, pipes, Kernel::Pick, &b, [1, 1, 1]).unwrap();
            ops::run(gpu, &[d]).unwrap();
            let got = common::read_u32(&tb, 1)[0];
            if got != want {
                differ += 1;
            }
        }
        assert!(
            differ <= 1,
            "{:?}: {differ} of 300 picks differ",
            pipes.variant
        );
    }
}
