use super::*;
use crate::parse::{parse_flow, Require};

fn spec(s: &str) -> FlowSpec {
    parse_flow(s, Require::Any).unwrap()
}

#[test]
fn priority_then_age_order() {
    let mut set = RuleSet::new();
    set.add(&spec("priority=1,actions=output:1"), 0);
    set.add(&spec("priority=5,ip,actions=output:2"), 0);
    set.add(&spec("priority=5,in_port=3,actions=output:3"), 0);
    let key = FlowKey {
        dl_type: 0x0800,
        in_port: 3,
        ..Default::default()
    };
    let mut wc = FlowKey::default();
    let r = set.lookup(0, &key, &mut wc).unwrap();
    assert_eq!(
        r.actions.to_vec(),
        vec![Action::Output(2)],
        "equal priority: first added wins"
    );
    assert_eq!(wc.dl_type, 0xffff);
    assert_eq!(wc.in_port, 0, "rules after the winner were not consulted");
    let key = FlowKey {
        dl_type: 0x86dd,
        in_port: 3,
        ..Default::default()
    };
    let mut wc = FlowKey::default();
    assert_eq!(
        set.lookup(0, &key, &mut wc).unwrap().actions.to_vec(),
        vec![Action::Output(3)]
    );
    assert_eq!(
        (wc.dl_type, wc.in_port),
        (0xffff, u32::MAX),
        "ip missed on dl_type, then in_port matched"
    );
    let key = FlowKey {
        in_port: 9,
        ..Default::default()
    };
    let r = set.lookup(0, &key, &mut FlowKey::default()).unwrap();
    assert_eq!(r.priority, 1);
    assert!(set.lookup(1, &key, &mut FlowKey::default()).is_none());
}

#[test]
fn add_replaces_identical() {
    let mut set = RuleSet::new();
    set.add(&spec("ip,actions=output:1"), 0);
    let v = set.version();
    set.add(&spec("ip,actions=output:2"), 0);
    assert_eq!(set.len(), 1);
    assert!(set.version() > v);
    assert_eq!(
        set.table(0).next().unwrap().actions.to_vec(),
        vec![Action::Output(2)]
    );
}

#[test]
fn delete_and_modify_strict_and_loose() {
    let mut set = RuleSet::new();
    set.add(&spec("priority=10,tcp,tp_dst=80,actions=output:1"), 0);
    set.add(&spec("priority=20,tcp,tp_dst=443,actions=output:1"), 0);
    set.add(&spec("priority=30,udp,actions=output:1"), 0);
    set.add(&spec("table=1,tcp,actions=output:1"), 0);
    assert_eq!(
        set.modify(&spec("tcp,actions=output:9"), Selection::Loose, false),
        2
    );
    assert_eq!(
        set.table(0).nth(1).unwrap().actions.to_vec(),
        vec![Action::Output(9)]
    );
    assert_eq!(
        set.delete(
            &spec("priority=10,tcp,tp_dst=443"),
            Selection::Strict,
            false
        )
        .len(),
        0
    );
    assert_eq!(
        set.delete(
            &spec("priority=20,tcp,tp_dst=443"),
            Selection::Strict,
            false
        )
        .len(),
        1
    );
    assert_eq!(set.delete(&spec("tcp"), Selection::Loose, true).len(), 2);
    assert_eq!(set.len(), 1);
    assert_eq!(set.delete(&spec(""), Selection::Loose, true).len(), 1);
}

#[test]
fn replace_keeps_identical_rules_and_their_counters() {
    let mut set = RuleSet::new();
    set.add(&spec("priority=5,ip,actions=output:1"), 0);
    set.add(&spec("priority=6,arp,actions=output:1"), 0);
    set.table(0).nth(1).unwrap().credit(7, 420, 0);
    let specs = vec![
        spec("priority=5,ip,actions=output:1"),
        spec("priority=9,udp,actions=drop"),
    ];
    assert_eq!(set.replace_with(&specs, 0), (1, 1, 1));
    assert_eq!(set.len(), 2);
    assert_eq!(set.table(0).next().unwrap().priority, 9);
    assert_eq!(
        set.table(0).nth(1).unwrap().counters(),
        (7, 420),
        "kept with its counters"
    );
}

#[test]
fn timeouts() {
    let mut set = RuleSet::new();
    set.add(&spec("hard_timeout=2,actions=drop"), 0);
    set.add(&spec("idle_timeout=1,ip,actions=drop"), 0);
    set.table(0).nth(1).unwrap().credit(1, 60, 1_500_000);
    assert!(
        set.expire(1_900_000).is_empty(),
        "idle rule was used at 1.5 s"
    );
    assert_eq!(set.expire(2_000_000).len(), 1, "hard timeout at 2 s");
    assert_eq!(set.expire(2_600_000).len(), 1, "idle since 1.5 s");
    assert!(set.is_empty());
}

#[test]
fn dump_format() {
    let mut set = RuleSet::new();
    set.add(&spec("priority=5,tcp,tp_dst=80,actions=output:2"), 0);
    set.table(0).next().unwrap().credit(3, 180, 0);
    assert_eq!(
        set.table(0).next().unwrap().dump(1_500_000),
        " cookie=0x0, duration=1.500s, table=0, n_packets=3, n_bytes=180, priority=5,tcp,tp_dst=80 actions=output:2"
    );
}

#[test]
fn table_counts_keep_matches_of_removed_rules_and_count_misses() {
    let mut set = RuleSet::new();
    set.add(&spec("priority=5,ip,actions=output:2"), 0);
    set.add(&spec("priority=9,tcp,actions=output:3"), 0);
    set.table(0).next().unwrap().credit(4, 240, 0);
    set.table(0).nth(1).unwrap().credit(1, 60, 0);
    set.miss_counter(0).credit(2, 120, 0);
    assert_eq!(set.table_counts(0), (2, 7, 5));
    assert!(set.miss_counter(0).is_counter());
    assert!(!set.table(0).next().unwrap().is_counter());
    // A modify keeps a rule's counters (counted once); a delete keeps
    // what it matched in the table's count; versions share them.
    set.modify(
        &spec("priority=9,tcp,actions=drop"),
        Selection::Strict,
        false,
    );
    assert_eq!(set.table_counts(0), (2, 7, 5));
    let old = set.clone();
    set.delete(&spec("priority=9,tcp"), Selection::Strict, false);
    assert_eq!(set.table(0).count(), 1);
    assert_eq!(set.table_counts(0), (1, 7, 5));
    assert_eq!(
        old.table_counts(0).2,
        5 + 4,
        "the old version still holds the rule"
    );
    assert_eq!(set.table_counts(1), (0, 0, 0));
}

/// Deleting every rule of a table empties it at once; its rules' matches
/// stay in its count, timeouts are forgotten, other tables are untouched,
/// and a partial delete still goes rule by rule.
#[test]
fn delete_all_of_a_table_empties_it_and_keeps_the_accounting() {
    let mut set = RuleSet::new();
    for i in 0..100 {
        set.add(
            &spec(&format!(
                "idle_timeout=5,ip,nw_dst=10.0.0.{i},actions=output:1"
            )),
            0,
        );
    }
    set.add(&spec("table=1,ip,actions=output:2"), 0);
    let key = FlowKey {
        dl_type: 0x0800,
        nw_dst: 0x0a00_0007,
        ..Default::default()
    };
    set.lookup(0, &key, &mut FlowKey::default())
        .unwrap()
        .credit(3, 300, 0);
    assert!(set.has_timeouts());
    // Only table 1's rules, by out_port: a partial delete overall.
    let gone = set.delete_if(&spec("table=1"), Selection::Loose, false, |_| true);
    assert_eq!((gone.len(), set.len()), (1, 100));
    let gone = set.delete(&spec(""), Selection::Loose, true);
    assert_eq!((gone.len(), set.len()), (100, 0));
    assert!(set.table_index(0).unwrap().is_empty());
    assert_eq!(set.table_index(0).unwrap().n_subtables(), 0);
    assert!(!set.has_timeouts());
    assert!(set.lookup(0, &key, &mut FlowKey::default()).is_none());
    // The 3 packets the deleted rule matched still count for table 0.
    assert_eq!(set.table_counts(0), (0, 3, 3));
    // A table that keeps some rules loses the others one by one.
    set.add(&spec("priority=2,ip,actions=output:1"), 0);
    set.add(&spec("priority=1,arp,actions=output:1"), 0);
    let gone = set.delete(&spec("arp"), Selection::Loose, true);
    assert_eq!((gone.len(), set.len()), (1, 1));
    assert!(set.lookup(0, &key, &mut FlowKey::default()).is_some());
}

/// The first rule or group that tracks connections makes the tracker's
/// memory ready (for as many connections as the switch set); rules that
/// do not leave it alone.
#[test]
fn a_rule_or_group_that_tracks_makes_conntrack_memory_ready() {
    use crate::group::{Bucket, Group, GroupType, GROUP_ANY, PORT_ANY};
    let mut r = RuleSet::new();
    r.conntrack().set_prealloc(64 * 50);
    r.add(&spec("priority=1,actions=output:2"), 0);
    r.add(&spec("priority=2,ip,actions=clone(output:3)"), 0);
    assert_eq!(r.conntrack().ready_for(), 0);
    r.add(&spec("priority=3,ip,actions=clone(ct(table=1,zone=5))"), 0);
    assert_eq!(r.conntrack().ready_for(), 3200);

    let mut g = RuleSet::new();
    g.conntrack().set_prealloc(64 * 50);
    let group = |id: u32, acts: &str| Group {
        id,
        kind: GroupType::Select,
        buckets: vec![Bucket {
            weight: 1,
            watch_port: PORT_ANY,
            watch_group: GROUP_ANY,
            actions: spec(&format!("actions={acts}")).actions.to_vec(),
            counter: Arc::new(Rule::counter()),
        }],
        of_buckets: None,
        counter: Arc::new(Rule::counter()),
        created_us: 0,
        slots: Default::default(),
        selection: Default::default(),
    };
    g.add_group(group(1, "output:2")).unwrap();
    assert_eq!(g.conntrack().ready_for(), 0);
    g.add_group(group(2, "ct(commit,table=2,zone=3,nat(dst=10.0.0.2))"))
        .unwrap();
    assert_eq!(g.conntrack().ready_for(), 3200);
}
