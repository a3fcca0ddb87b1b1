//! Example-based tests of `Ring`: errors, statuses, lookups, versions, diffs.

#![allow(clippy::unwrap_used)] // Tests: a panic is a failed assertion.

use kv_router::{Error, Ring, RingSettings};
use kv_types::{Member, NodeId, NodeStatus, key_hash};

fn m(id: &str, zone: &str, weight: u32, status: NodeStatus) -> Member {
    Member {
        id: NodeId::new(id).unwrap(),
        zone: zone.into(),
        host: format!("host-{id}"),
        weight,
        status,
    }
}

fn five() -> Vec<Member> {
    ["a", "b", "c", "d", "e"]
        .iter()
        .enumerate()
        .map(|(i, id)| m(id, ["z1", "z2", "z3"][i % 3], 1, NodeStatus::Up))
        .collect()
}

#[test]
fn bad_member_sets_are_refused() {
    let c = RingSettings::default();
    assert_eq!(Ring::build(c, &[]), Err(Error::NoEligibleMember));
    let idle = [
        m("a", "z", 1, NodeStatus::Draining),
        m("b", "z", 1, NodeStatus::Left),
        m("c", "z", 0, NodeStatus::Up),
    ];
    assert_eq!(Ring::build(c, &idle), Err(Error::NoEligibleMember));
    let dup = [
        m("a", "z", 1, NodeStatus::Up),
        m("a", "y", 2, NodeStatus::Up),
    ];
    assert!(matches!(Ring::build(c, &dup), Err(Error::DuplicateMember(id)) if id.as_str() == "a"));
    let heavy = [m("a", "z", 1001, NodeStatus::Up)];
    assert!(matches!(
        Ring::build(c, &heavy),
        Err(Error::InvalidMember { .. })
    ));
    let crowd: Vec<Member> = (0..=kv_router::MAX_OWNERS)
        .map(|i| m(&format!("n{i}"), "z", 1, NodeStatus::Up))
        .collect();
    assert!(matches!(
        Ring::build(c, &crowd),
        Err(Error::TooManyOwners { count: 1025, .. })
    ));
    let bad = RingSettings {
        partitions: 1000,
        ..c
    };
    assert!(matches!(
        Ring::build(bad, &five()),
        Err(Error::InvalidConfig(_))
    ));
}

#[test]
fn draining_and_left_members_own_nothing_but_are_kept() {
    let mut members = five();
    members[1].status = NodeStatus::Draining;
    members[2].status = NodeStatus::Left;
    let ring = Ring::build(RingSettings::default(), &members).unwrap();
    assert_eq!(ring.members().len(), 5);
    for gone in [&members[1].id, &members[2].id] {
        assert_eq!(ring.ownership_share(gone), 0.0);
        assert!((0..1024).all(|p| !ring.preference_list(p).contains(gone)));
    }
    let total: f64 = members.iter().map(|x| ring.ownership_share(&x.id)).sum();
    assert!((total - 1.0).abs() < 1e-12);
    assert!((ring.ownership_share(&members[0].id) - 1.0 / 3.0).abs() < 1.0 / 1024.0);
}

#[test]
fn key_lookups_agree_with_the_hash_and_ranges() {
    let ring = Ring::build(RingSettings::default(), &five()).unwrap();
    for key in [&b"user:1"[..], b"", b"another key"] {
        let p = ring.key_partition(key);
        assert_eq!(p, ring.partition_of(key_hash(key)));
        let (lo, hi) = ring.partition_range(p);
        assert!((lo..=hi).contains(&key_hash(key)));
        assert_eq!(ring.key_preference_list(key), ring.preference_list(p));
    }
    assert_eq!(ring.partition_of(u64::MAX), 1023);
    assert_eq!(ring.preference_list(3).len(), 3);
}

#[test]
fn versions_identify_placements() {
    let c = RingSettings::default();
    let a = Ring::build(c, &five()).unwrap();
    let again = Ring::build(c, &five()).unwrap();
    assert_eq!(a.version(), again.version());
    // A member that owns nothing does not change the placement.
    let mut with_left = five();
    with_left.push(m("f", "z1", 1, NodeStatus::Left));
    assert_eq!(Ring::build(c, &with_left).unwrap().version(), a.version());
    // Any ownership or list change does.
    let mut drained = five();
    drained[4].status = NodeStatus::Draining;
    assert_ne!(Ring::build(c, &drained).unwrap().version(), a.version());
    let n2 = RingSettings { replicas: 2, ..c };
    assert_ne!(Ring::build(n2, &five()).unwrap().version(), a.version());
}

#[test]
fn diff_lists_the_changed_preference_lists() {
    let c = RingSettings::default();
    let old = Ring::build(c, &five()).unwrap();
    let mut joined = five();
    joined.push(m("f", "z2", 1, NodeStatus::Joining));
    let new = Ring::build(c, &joined).unwrap();
    let diff = Ring::diff(&old, &new).unwrap();
    assert!(!diff.is_empty());
    let f = &joined[5].id;
    // Every partition the joiner now replicates is in the plan.
    for p in 0..1024 {
        if new.preference_list(p).contains(f) {
            assert!(diff.iter().any(|mv| mv.partition == p));
        }
    }
    for mv in &diff {
        assert_eq!(mv.from, old.preference_list(mv.partition));
        assert_eq!(mv.to, new.preference_list(mv.partition));
    }
    assert!(Ring::diff(&old, &old).unwrap().is_empty());
    let small = Ring::build(
        RingSettings {
            partitions: 64,
            ..c
        },
        &five(),
    )
    .unwrap();
    assert!(matches!(
        Ring::diff(&old, &small),
        Err(Error::PartitionCountMismatch { old: 1024, new: 64 })
    ));
}

#[test]
fn local_cluster_on_one_host_still_gets_full_lists() {
    let members: Vec<Member> = five()
        .into_iter()
        .map(|mut x| {
            x.host = "laptop".into();
            x
        })
        .collect();
    let ring = Ring::build(RingSettings::default(), &members).unwrap();
    for p in 0..1024 {
        assert_eq!(ring.preference_list(p).len(), 3);
    }
}

#[test]
fn a_hundred_nodes_build_quickly() {
    // The release-mode figure is in the ring_report example; in debug mode
    // this is a smoke test of the 100-node path.
    let members: Vec<Member> = (0..100)
        .map(|i| {
            m(
                &format!("n{i}"),
                ["z1", "z2", "z3"][i % 3],
                1 + (i % 3) as u32,
                NodeStatus::Up,
            )
        })
        .collect();
    let ring = Ring::build(
        RingSettings {
            partitions: 4096,
            ..RingSettings::default()
        },
        &members,
    )
    .unwrap();
    let total: u32 = members.iter().map(|x| ring.owned_partitions(&x.id)).sum();
    assert_eq!(total, 4096);
}
