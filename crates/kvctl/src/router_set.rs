//! `--router-set KEY=NUMBER`: the client's own router tunables, one
//! numeric field of `kv_router::RouterSettings` at a time, by its name in
//! that struct (the same names as the nodes' `[router]` keys for every
//! plain number: `near_tie`, `hop_credit`, `hedge_quantile`,
//! `hedge_budget`, ...), every duration by its name with `_ms` in
//! milliseconds, as the nodes' keys are (`latency_window_ms`,
//! `breaker_cooldown_ms`, ...), and every switch by its name with `true` or
//! `false` (`outrun_floor=false`).

use anyhow::{Result, anyhow, bail};
use kv_router::RouterSettings;
use serde_json::Value;

/// The router settings with every `KEY=NUMBER` of `sets` applied to the
/// defaults, in order; `None` when `sets` is empty.
///
/// # Errors
/// When an item is not `KEY=NUMBER`, KEY is not a numeric field or a
/// switch of the settings (the message lists those that are), a switch is
/// given anything but `true` or `false`, the number does not fit
/// the field (an integer field takes a non-negative integer), or the
/// result does not validate (`RouterSettings::validate`).
pub fn parse(sets: &[String]) -> Result<Option<RouterSettings>> {
    if sets.is_empty() {
        return Ok(None);
    }
    let mut fields = serde_json::to_value(RouterSettings::default())?;
    let Some(map) = fields.as_object_mut() else {
        bail!("the router settings do not serialize to an object");
    };
    let numeric: Vec<String> = map
        .iter()
        .filter_map(|(k, v)| {
            if v.is_number() || v.is_boolean() {
                Some(k.clone())
            } else {
                is_duration(v).then(|| format!("{k}_ms"))
            }
        })
        .collect();
    for item in sets {
        let (key, text) = item
            .split_once('=')
            .ok_or_else(|| anyhow!("--router-set takes KEY=NUMBER, not {item:?}"))?;
        if let Some(slot) = map.get_mut(key).filter(|v| v.is_boolean()) {
            *slot =
                Value::Bool(text.parse().map_err(|_| {
                    anyhow!("--router-set {key}: takes true or false, not {text:?}")
                })?);
            continue;
        }
        let number: f64 = text
            .parse()
            .ok()
            .filter(|n: &f64| n.is_finite())
            .ok_or_else(|| anyhow!("--router-set {key}: {text:?} is not a number"))?;
        if let Some(slot) = key
            .strip_suffix("_ms")
            .and_then(|name| map.get_mut(name))
            .filter(|v| is_duration(v))
        {
            if number < 0.0 || number > u32::MAX as f64 {
                bail!(
                    "--router-set {key}: takes milliseconds from 0 to {}, not {text}",
                    u32::MAX
                );
            }
            *slot = serde_json::to_value(std::time::Duration::from_secs_f64(number / 1000.0))?;
            continue;
        }
        let Some(slot) = map.get_mut(key).filter(|v| v.is_number()) else {
            bail!(
                "--router-set: {key:?} is not a numeric router setting or switch (one of: {})",
                numeric.join(", ")
            );
        };
        *slot = if slot.is_u64() {
            if number < 0.0 || number.fract() != 0.0 || number > u32::MAX as f64 {
                bail!("--router-set {key}: takes a non-negative integer, not {text}");
            }
            Value::from(number as u64)
        } else {
            Value::from(number)
        };
    }
    let settings: RouterSettings = serde_json::from_value(fields)
        .map_err(|e| anyhow!("--router-set: the settings do not fit: {e}"))?;
    settings
        .validate()
        .map_err(|e| anyhow!("--router-set: {e}"))?;
    Ok(Some(settings))
}

/// Whether `v` is a serialized `std::time::Duration` (`{"secs", "nanos"}`).
fn is_duration(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|o| o.len() == 2 && o.contains_key("secs") && o.contains_key("nanos"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn numbers_set_their_fields_and_nothing_else() {
        assert_eq!(parse(&[]).unwrap(), None);
        let s = parse(&sets(&[
            "hedge_budget=0",
            "near_tie=0.1",
            "in_flight_limit=32",
        ]))
        .unwrap()
        .unwrap();
        let d = RouterSettings::default();
        assert_eq!(s.hedge_budget, 0.0);
        assert_eq!(s.near_tie, 0.1);
        assert_eq!(s.in_flight_limit, 32);
        assert_eq!(
            RouterSettings {
                hedge_budget: d.hedge_budget,
                near_tie: d.near_tie,
                in_flight_limit: d.in_flight_limit,
                ..s
            },
            d
        );
    }

    #[test]
    fn switches_take_true_or_false() {
        let s = parse(&sets(&["outrun_floor=false"])).unwrap().unwrap();
        assert!(!s.outrun_floor);
        assert_eq!(
            RouterSettings {
                outrun_floor: true,
                ..s
            },
            RouterSettings::default()
        );
        let err = parse(&sets(&["outrun_floor=0"])).unwrap_err().to_string();
        assert!(err.contains("true or false"), "{err}");
        let err = parse(&sets(&["nearly=1"])).unwrap_err().to_string();
        assert!(err.contains("outrun_floor"), "{err}");
    }

    #[test]
    fn durations_are_set_in_milliseconds_by_their_name_with_ms() {
        let s = parse(&sets(&["breaker_cooldown_ms=250", "latency_window_ms=0.5"]))
            .unwrap()
            .unwrap();
        assert_eq!(s.breaker_cooldown, std::time::Duration::from_millis(250));
        assert_eq!(s.latency_window, std::time::Duration::from_micros(500));
        let err = parse(&sets(&["latency_window_ms=-1"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("milliseconds"), "{err}");
        // The list of settings names them so.
        let err = parse(&sets(&["nearly=1"])).unwrap_err().to_string();
        assert!(err.contains("latency_window_ms"), "{err}");
        assert!(parse(&sets(&["latency_window=1"])).is_err());
    }

    #[test]
    fn bad_items_are_refused_with_what_would_do() {
        let err = |items: &[&str]| parse(&sets(items)).unwrap_err().to_string();
        assert!(err(&["near_tie"]).contains("KEY=NUMBER"));
        assert!(err(&["near_tie=wide"]).contains("not a number"));
        assert!(err(&["near_tie=inf"]).contains("not a number"));
        let unknown = err(&["nearly=1"]);
        assert!(
            unknown.contains("not a numeric router setting"),
            "{unknown}"
        );
        assert!(unknown.contains("hedge_budget"), "{unknown}");
        // Not a number in the settings (a mode, a duration, a table).
        assert!(err(&["mode=1"]).contains("not a numeric router setting"));
        assert!(err(&["in_flight_limit=1.5"]).contains("non-negative integer"));
        assert!(err(&["in_flight_limit=-1"]).contains("non-negative integer"));
        // Out of range for the router itself.
        assert!(err(&["hedge_quantile=2"]).contains("--router-set"));
    }
}
