//! The CPU this process may use under its cgroup's quota, re-read every
//! report period: a node capped by a container limit (or an operator's
//! `cpu.cfs_quota_us`) at a tenth of a core that uses that tenth is busy,
//! and must report a CPU use near 1.0 rather than 0.05 of the machine's
//! cores. Measured (docs/benchmarks.md, "Router benchmark: the nodes' own
//! decisions, and what moves a hot key's reads", items 5 and 6): under
//! slow-node-cpu the capped node reported 0.054 and
//! won near-ties on the load dimension against healthy peers with a few
//! requests more in flight.
//!
//! cgroup v1: `cpu.cfs_quota_us` / `cpu.cfs_period_us` (quota -1: none);
//! v2: `cpu.max` ("QUOTA PERIOD", QUOTA "max": none), each in the
//! process's own cgroup (`/proc/self/cgroup`) under `/sys/fs/cgroup`, or
//! at the mount's root (inside a container, whose cgroup is its root).

use std::path::Path;

/// Cores the process may use by its cgroup's CPU quota (a fraction,
/// above 0), or `None` without a quota or where none can be read.
pub fn quota_cores() -> Option<f64> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let root = Path::new("/sys/fs/cgroup");
    let read = |dir: &Path, file: &str| std::fs::read_to_string(dir.join(file)).ok();
    for line in cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let path = path.trim_start_matches('/');
        // The process's own cgroup first, then the mount's root.
        if controllers.is_empty() {
            // v2: the unified hierarchy.
            if let Some(text) = [root.join(path), root.to_path_buf()]
                .iter()
                .find_map(|dir| read(dir, "cpu.max"))
            {
                return parse_v2(&text);
            }
        } else if controllers.split(',').any(|c| c == "cpu") {
            let dirs = ["cpu", "cpu,cpuacct", "cpuacct,cpu"]
                .iter()
                .flat_map(|m| [root.join(m).join(path), root.join(m)]);
            for dir in dirs {
                if let (Some(q), Some(p)) = (
                    read(&dir, "cpu.cfs_quota_us"),
                    read(&dir, "cpu.cfs_period_us"),
                ) {
                    return parse_v1(&q, &p);
                }
            }
        }
    }
    None
}

/// The cores a process may use: the machine's `cores`, or fewer by its
/// cgroup's `quota` (cores, from [`quota_cores`]).
pub fn usable_cores(cores: usize, quota: Option<f64>) -> f64 {
    quota.map_or(cores as f64, |q| q.min(cores as f64))
}

/// `cpu.cfs_quota_us` and `cpu.cfs_period_us` (us) as cores; `None` for
/// no quota (-1) or a malformed or zero value.
fn parse_v1(quota: &str, period: &str) -> Option<f64> {
    let quota: i64 = quota.trim().parse().ok()?;
    let period: i64 = period.trim().parse().ok()?;
    (quota > 0 && period > 0).then(|| quota as f64 / period as f64)
}

/// `cpu.max` ("QUOTA PERIOD" in us, QUOTA "max" for none) as cores.
fn parse_v2(text: &str) -> Option<f64> {
    let mut parts = text.split_whitespace();
    let quota = parts.next()?;
    let period = parts.next().unwrap_or("100000");
    if quota == "max" {
        return None;
    }
    parse_v1(quota, period)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1_quota_is_cores_and_minus_one_is_none() {
        assert_eq!(parse_v1("7500\n", "100000\n"), Some(0.075));
        assert_eq!(parse_v1("200000", "100000"), Some(2.0));
        assert_eq!(parse_v1("-1", "100000"), None);
        assert_eq!(parse_v1("0", "100000"), None);
        assert_eq!(parse_v1("x", "100000"), None);
    }

    #[test]
    fn a_quota_below_the_machine_is_the_usable_cores_and_above_it_is_not() {
        assert_eq!(usable_cores(2, Some(0.075)), 0.075);
        assert_eq!(usable_cores(2, Some(4.0)), 2.0);
        assert_eq!(usable_cores(2, None), 2.0);
    }

    #[test]
    fn a_v2_cpu_max_is_cores_and_max_is_none() {
        assert_eq!(parse_v2("50000 100000\n"), Some(0.5));
        assert_eq!(parse_v2("max 100000\n"), None);
        assert_eq!(parse_v2(""), None);
    }
}
