//! The partition ring against the design notes' token ring
//! (`hash("node#i")`, 150 tokens per weight), the baseline design.md, "Ring"
//! names: balance and movement of both. Run with `--nocapture` to see the
//! table.

#![allow(clippy::unwrap_used)] // Tests: a panic is a failed assertion.

use kv_router::report::{balance_report, render_table};

#[test]
fn partitions_beat_tokens_on_balance_and_move_near_the_optimum() {
    let rows = balance_report(&[5], 1024).unwrap();
    println!("{}", render_table(&rows));
    let ours = rows.iter().find(|r| r.scheme == "partitions").unwrap();
    let seed = rows.iter().find(|r| r.scheme == "tokens").unwrap();
    assert!(
        ours.balance <= seed.balance,
        "balance {} vs tokens {}",
        ours.balance,
        seed.balance
    );
    // Exact quotas: the only imbalance is the rounding of 1024 / 5.
    assert!(ours.balance <= 205.0 / 204.8 + 1e-9);
    // 5 -> 6 nodes and 5 -> 4 nodes move at most 15% more than the
    // changed node's share.
    assert!(ours.join_ratio() <= 1.15, "join {}", ours.join_ratio());
    assert!(ours.leave_ratio() <= 1.15, "leave {}", ours.leave_ratio());
    // The seed's ring moves only what it must, but is less balanced.
    assert!(seed.join_ratio() <= 1.2 && seed.leave_ratio() <= 1.2);
}
