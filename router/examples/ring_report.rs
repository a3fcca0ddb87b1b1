//! Prints the balance and movement of the partition ring against the seed's
//! token ring (design.md, Ring), and ring build times, as Markdown for
//! docs/benchmarks.md.
//!
//! Run: `cargo run --release -p kv-router --example ring_report`

use std::time::Instant;

use kv_router::report::{balance_report, render_table, synthetic_members};
use kv_router::{Ring, RingSettings};

fn main() -> Result<(), kv_router::Error> {
    for q in [1024, 4096] {
        println!("## Ring balance and movement (Q = {q}, equal weights)\n");
        let rows = balance_report(&[5, 10, 20], q)?;
        println!("{}", render_table(&rows));
    }
    println!("## Ring build time\n");
    println!("| nodes | Q | build (ms, best of 5) |\n|---:|---:|---:|");
    for (n, q) in [(5, 1024), (20, 1024), (100, 4096), (100, 16384)] {
        let members = synthetic_members(n);
        let config = RingSettings {
            partitions: q,
            ..RingSettings::default()
        };
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            let ring = Ring::build(config, &members)?;
            best = best.min(t.elapsed().as_secs_f64() * 1e3);
            std::hint::black_box(ring);
        }
        println!("| {n} | {q} | {best:.2} |");
    }
    Ok(())
}
