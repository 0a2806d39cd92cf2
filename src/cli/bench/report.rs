//! The bench's reports: each tier's results as text lines and as JSON
//! (`--json`), one helper per kind of result.

use super::super::json::Json;
use glmw::bench::{self, Stats};
use glmw::engine::HostTimes;
use glmw::gpu::barriers::Barriers;

pub(super) fn stats_json(s: &Stats) -> Json {
    Json::obj(vec![
        ("n", Json::num(s.n as f64)),
        ("median_us", Json::num(s.median)),
        ("p10_us", Json::num(s.p10)),
        ("p90_us", Json::num(s.p90)),
        ("iqr_us", Json::num(s.iqr)),
        ("mad_us", Json::num(s.mad)),
    ])
}

pub(super) fn stats_text(s: &Stats) -> String {
    format!(
        "median {:.1} us, p10 {:.1}, p90 {:.1}, IQR {:.1}, MAD {:.1} (n {})",
        s.median, s.p10, s.p90, s.iqr, s.mad, s.n
    )
}

/// llama-bench's table: one row per test, t/s as mean ± sd.
pub(super) fn test_table(
    tests: &[bench::TestRun],
    reps: usize,
    ubatch: usize,
    text: &mut Vec<String>,
) {
    text.push(format!(
        "| {:>16} | {:>20} | {:>12} | {:>16} |",
        "test", "t/s", "ms/token", "predicted ms"
    ));
    text.push(format!(
        "| {:->16}:| {:->20}:| {:->12}:| {:->16}:|",
        "", "", "", ""
    ));
    for t in tests {
        let (m, sd) = t.ts();
        let pred = t
            .prediction
            .as_ref()
            .map_or(String::new(), |p| format!("{:.3}", p.predicted_us() / 1e3));
        text.push(format!(
            "| {:>16} | {:>20} | {:>12.3} | {:>16} |",
            t.name(),
            format!("{m:.2} ± {sd:.2}"),
            t.us_per_token() / 1e3,
            pred
        ));
    }
    text.push(format!(
        "(-r {reps}; pp through the batched prefill, ubatch {ubatch}; predicted: the block tier's dense + MoE blocks + head)"
    ));
}

pub(super) fn barrier_lines(r: &bench::ModelReport, text: &mut Vec<String>) {
    let (d, p) = (&r.decode, &r.prefill);
    text.push(format!(
        "decode: {} dispatches/token, {} barriers/token ({} buffer transitions); prefill chunk: {} dispatches, {} barriers ({} transitions)",
        d.dispatches, d.barriers, d.transitions, p.dispatches, p.barriers, p.transitions
    ));
    text.push(format!("  of a token: {}", parts_text(&r.parts)));
}

pub(super) fn parts_text(parts: &[(&str, Barriers)]) -> String {
    let each: Vec<String> = parts
        .iter()
        .map(|(n, b)| format!("{n} {} dispatches, {} barriers", b.dispatches, b.barriers))
        .collect();
    each.join("; ")
}

pub(super) fn parts_json(parts: &[(&str, Barriers)]) -> Json {
    Json::Arr(
        parts
            .iter()
            .map(|(n, b)| {
                Json::obj(vec![
                    ("part", Json::str(*n)),
                    ("dispatches", Json::num(b.dispatches as f64)),
                    ("barriers", Json::num(b.barriers as f64)),
                    ("transitions", Json::num(b.transitions as f64)),
                ])
            })
            .collect(),
    )
}

pub(super) fn prediction_text(name: &str, p: &bench::Prediction, measured_us: f64) -> String {
    let med = |s: &Option<Stats>| s.as_ref().map_or(0.0, |s| s.median);
    let off = |us: f64| 100.0 * (us / measured_us.max(1e-9) - 1.0);
    let pred = p.predicted_us();
    let mut t = format!(
        "{name}: measured {measured_us:.1} us/token; predicted {pred:.1} us ({:+.1}%) = {} x dense {:.1} + ",
        off(pred),
        p.n_dense,
        med(&p.dense),
    );
    match &p.moe_sequence {
        Some(s) => t.push_str(&format!(
            "{} MoE blocks in sequence ({:.1} us each) + head {:.1} (@ pos {}); from one MoE block replayed alone ({:.1} us, a command buffer boundary each) {:.1} us ({:+.1}%)",
            p.n_moe,
            s.median,
            p.head.median,
            p.pos,
            med(&p.moe),
            p.token_us,
            off(p.token_us)
        )),
        None => t.push_str(&format!(
            "{} x MoE {:.1} + head {:.1} (@ pos {})",
            p.n_moe,
            med(&p.moe),
            p.head.median,
            p.pos
        )),
    }
    let gap = measured_us - p.token_gpu.median;
    t.push_str(&format!(
        "; one whole token replayed on the GPU {:.1} us, {gap:.1} us ({:.1}%) under the measured one",
        p.token_gpu.median,
        100.0 * gap / measured_us.max(1e-9)
    ));
    t
}

/// Where the host's time went in a tg test: recording the next step while
/// the GPU runs one, submitting, and waiting for the GPU.
pub(super) fn host_text(name: &str, h: &HostTimes) -> String {
    let (record, submit, wait) = h.per_step_us();
    format!(
        "{name}: host per token: recording {record:.0} us, submitting {submit:.0} us, \
         waiting for the GPU {wait:.0} us (the recording overlaps the GPU's work: \
         little waiting means the host sets the pace)"
    )
}

fn host_json(h: &HostTimes) -> Json {
    let (record, submit, wait) = h.per_step_us();
    Json::obj(vec![
        ("record_us", Json::num(record)),
        ("submit_us", Json::num(submit)),
        ("wait_us", Json::num(wait)),
    ])
}

pub(super) fn prediction_json(p: &bench::Prediction, measured_us: f64) -> Json {
    let opt = |s: &Option<Stats>| s.as_ref().map_or(Json::Null, stats_json);
    Json::obj(vec![
        ("pos", Json::num(p.pos as f64)),
        ("predicted_us", Json::num(p.predicted_us())),
        ("measured_us", Json::num(measured_us)),
        (
            "error",
            Json::num(p.predicted_us() / measured_us.max(1e-9) - 1.0),
        ),
        ("token_us", Json::num(p.token_us)),
        ("n_dense", Json::num(p.n_dense as f64)),
        ("dense", opt(&p.dense)),
        ("n_moe", Json::num(p.n_moe as f64)),
        (
            "moe_layer",
            p.moe_layer.map_or(Json::Null, |l| Json::num(l as f64)),
        ),
        ("moe", opt(&p.moe)),
        ("head", stats_json(&p.head)),
        ("moe_sequence", opt(&p.moe_sequence)),
        (
            "token_us_sequence",
            p.token_us_sequence().map_or(Json::Null, Json::num),
        ),
        ("token_gpu", stats_json(&p.token_gpu)),
        ("replay_gap_us", Json::num(measured_us - p.token_gpu.median)),
    ])
}

pub(super) fn test_json(t: &bench::TestRun) -> Json {
    let (avg_ts, stddev_ts) = t.ts();
    let nums = |v: Vec<f64>| Json::Arr(v.into_iter().map(Json::num).collect());
    Json::obj(vec![
        ("name", Json::str(t.name())),
        ("n_prompt", Json::num(t.n_prompt as f64)),
        ("n_gen", Json::num(t.n_gen as f64)),
        ("n_depth", Json::num(t.depth as f64)),
        ("avg_ts", Json::num(avg_ts)),
        ("stddev_ts", Json::num(stddev_ts)),
        ("samples_ts", nums(t.samples_ts())),
        ("samples_ns", nums(t.samples_ns.clone())),
        ("us_per_token", Json::num(t.us_per_token())),
        (
            "prediction",
            t.prediction
                .as_ref()
                .map_or(Json::Null, |p| prediction_json(p, t.us_per_token())),
        ),
        ("host", t.host.as_ref().map_or(Json::Null, host_json)),
    ])
}

pub(super) fn op_lines(ops: &[bench::OpTime], total_us: f64, text: &mut Vec<String>) {
    for o in ops.iter().take(20) {
        text.push(format!(
            "  {:<24} {:<14} x{:<3} {:>9.1} us {:>5.1}%",
            o.op,
            o.kernel,
            o.count,
            o.us,
            100.0 * o.us / total_us.max(1e-9)
        ));
    }
}

pub(super) fn ops_json(ops: &[bench::OpTime], total_us: f64) -> Json {
    Json::Arr(
        ops.iter()
            .map(|o| {
                Json::obj(vec![
                    ("op", Json::str(o.op.clone())),
                    ("kernel", Json::str(o.kernel)),
                    ("count", Json::num(o.count as f64)),
                    ("us", Json::num(o.us)),
                    ("share", Json::num(o.us / total_us.max(1e-9))),
                ])
            })
            .collect(),
    )
}

/// Each op's cost inside the token (`bench::op_costs`), as text lines and
/// JSON.
pub(super) fn op_costs_lines(c: &bench::OpCosts, pos: usize, text: &mut Vec<String>) -> Json {
    text.push(format!(
        "what each op costs the token (the token replayed at pos {pos} without it, against {:.1} us whole):",
        c.token.median
    ));
    text.push(format!(
        "  {:<24} {:>6} {:>12} {:>10} {:>12}",
        "op", "count", "without us", "cost us", "us per disp"
    ));
    let mut rows = Vec::new();
    for o in &c.ops {
        let cost = o.cost_us(&c.token);
        text.push(format!(
            "  {:<24} {:>6} {:>12.1} {:>10.1} {:>12.2}",
            o.op,
            o.count,
            o.without.median,
            cost,
            cost / o.count.max(1) as f64
        ));
        rows.push(Json::obj(vec![
            ("op", Json::str(o.op.clone())),
            ("count", Json::num(o.count as f64)),
            ("without", stats_json(&o.without)),
            ("cost_us", Json::num(cost)),
        ]));
    }
    Json::obj(vec![
        ("token", stats_json(&c.token)),
        ("ops", Json::Arr(rows)),
    ])
}

/// The dispatch-floor chains, as text lines and JSON rows.
pub(super) fn floor_lines(rows: &[bench::floor::FloorRow], text: &mut Vec<String>) -> Json {
    if rows.is_empty() {
        return Json::Null;
    }
    text.push("dependent dispatch floor (chains of one kernel):".into());
    text.push(format!(
        "  {:<12} {:>10} {:>8} {:>8} {:>10}",
        "work", "workgroups", "MB", "barrier", "us/disp"
    ));
    let mut out = Vec::new();
    for f in rows {
        text.push(format!(
            "  {:<12} {:>10} {:>8.1} {:>8} {:>10.2}",
            f.what,
            f.workgroups,
            f.bytes as f64 / 1e6,
            if f.barrier { "yes" } else { "no" },
            f.us_per_dispatch
        ));
        out.push(Json::obj(vec![
            ("work", Json::str(f.what.clone())),
            ("workgroups", Json::num(f.workgroups as f64)),
            ("bytes", Json::num(f.bytes as f64)),
            ("barrier", Json::Bool(f.barrier)),
            ("us_per_dispatch", Json::num(f.us_per_dispatch)),
        ]));
    }
    Json::Arr(out)
}
