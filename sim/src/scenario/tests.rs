//! Tests of the scenarios: presets, names, fault plans and the swarm's draws.

use super::*;

#[test]
fn disk_latency_is_uniform_by_default_and_follows_given_quantiles() {
    let mut s = Scenario::base("t");
    let (mut a, mut b) = (Rng::new(3), Rng::new(3));
    for _ in 0..100 {
        // The default draws exactly what it always drew.
        assert_eq!(s.disk_latency(&mut a), b.range(s.disk_min, s.disk_max));
    }
    s.disk_quantiles = vec![100, 200, 200, 1_000];
    let draws: Vec<Time> = (0..3_000).map(|_| s.disk_latency(&mut a)).collect();
    assert!(draws.iter().all(|d| (100..=1_000).contains(d)));
    // A third of the draws falls in each segment between quantiles.
    let low = draws.iter().filter(|d| **d < 200).count() as f64 / 3_000.0;
    let high = draws.iter().filter(|d| **d > 200).count() as f64 / 3_000.0;
    assert!(
        (low - 1.0 / 3.0).abs() < 0.05 && (high - 1.0 / 3.0).abs() < 0.05,
        "{low} {high}"
    );
}

#[test]
fn every_named_scenario_and_profile_exists() {
    for n in Scenario::names() {
        assert!(Scenario::named(n).is_some(), "{n}");
    }
    for p in PauseProfile::names() {
        assert!(PauseProfile::preset(p).is_some(), "{p}");
    }
}

#[test]
fn a_name_a_run_printed_reads_back_as_its_scenario() {
    for n in Scenario::names() {
        let s = Scenario::named(n).unwrap_or_else(|| unreachable!());
        assert_eq!(Scenario::parse(n, 1), Some(s), "{n}");
    }
    assert_eq!(Scenario::parse("swarm", 5), Some(Scenario::from_seed(5)));
    // What `sim swarm` prints for a seed names that seed's scenario,
    // and no other seed's.
    let s = Scenario::from_seed(5);
    assert_eq!(Scenario::parse(&s.name, 5), Some(s.clone()));
    let other = (6..100)
        .find(|x| Scenario::from_seed(*x).name != s.name)
        .unwrap_or(6);
    assert_eq!(Scenario::parse(&s.name, other), None);
    assert_eq!(Scenario::parse("no-such", 1), None);
}

#[test]
fn plans_stay_in_the_fault_window_and_depend_only_on_the_seed() {
    let s = Scenario::named("chaos").unwrap_or_else(|| unreachable!());
    let a = s.plan(&mut Rng::new(9));
    assert_eq!(a, s.plan(&mut Rng::new(9)));
    assert!(!a.is_empty());
    assert!(a
        .iter()
        .all(|(t, _)| *t >= s.fault_start && *t < s.fault_end + 20 * MS));
    let kinds: std::collections::BTreeSet<&str> = a
        .iter()
        .map(|(_, f)| match f {
            Fault::Pause { .. } => "pause",
            Fault::Crash { .. } => "crash",
            Fault::Isolate { .. } => "isolate",
            Fault::CutLink { .. } | Fault::CutFromLeader { .. } => "cut",
            _ => "aimed at a window",
        })
        .collect();
    assert!(
        kinds.contains("pause") && kinds.contains("crash"),
        "{kinds:?}"
    );
    assert!(
        !kinds.contains("aimed at a window"),
        "named scenarios draw no window faults"
    );
}

#[test]
fn a_share_of_the_swarm_draws_faults_aimed_at_windows_inside_the_fault_window() {
    let mut windowed = 0;
    for seed in 0..1_000 {
        let s = Scenario::from_seed(seed);
        let armed: Vec<&(Time, Fault)> = s.schedule.iter().filter(|(_, f)| f.is_armed()).collect();
        assert_eq!(
            s.name.contains("+windows("),
            !armed.is_empty(),
            "seed {seed}: {}",
            s.name
        );
        assert!(
            armed
                .iter()
                .all(|(t, _)| *t >= s.fault_start && *t < s.fault_end),
            "seed {seed}: {armed:?}"
        );
        windowed += usize::from(!armed.is_empty());
    }
    // WINDOW_SHARE of 1,000 seeds, give or take the draw.
    assert!((240..360).contains(&windowed), "{windowed} of 1,000 seeds");
}
