//! Which worker runs which connector: the group leader's decision, pure (no I/O), as Kafka
//! Connect's incremental cooperative assignor makes it.
//!
//! - **Balanced:** with M connectors on N workers, each runs ⌊M/N⌋ or ⌈M/N⌉.
//! - **Stable:** a connector stays where it runs unless balance needs it elsewhere; a worker
//!   that joins takes only what balance gives it.
//! - **Delayed:** the connectors of a worker that left are held for
//!   `scheduled.rebalance.max.delay.ms`: a worker that comes back within it (same worker id)
//!   gets them back; after it, they are spread over the others.
//!
//! Paused and stopped connectors are assigned like the others (they keep their worker, as in
//! Connect); whether one streams is its target state's business, not the assignment's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// One member of the group, as its JoinGroup metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The coordinator's id for it (unique per join).
    pub member_id: String,
    /// The worker's id (its advertised REST URL), stable across restarts.
    pub worker: String,
    /// The connectors it runs now.
    pub running: BTreeSet<String>,
}

/// What the leader remembers between rebalances.
#[derive(Debug, Default)]
pub struct Leader {
    /// The last assignment, by worker.
    previous: BTreeMap<String, BTreeSet<String>>,
    /// The connectors of workers that left, held for them until the instant given.
    held: BTreeMap<String, (Instant, BTreeSet<String>)>,
    /// The generation `previous` was made in.
    generation: i32,
}

/// The leader's decision: each member's connectors, and when to rebalance again (when a
/// held worker's delay ends), if ever.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub by_member: BTreeMap<String, BTreeSet<String>>,
    pub rebalance_in: Option<Duration>,
}

impl Leader {
    /// The group's last assignment as a member knew it (`generation`, by worker): a leader
    /// that did not make it (new, or leading again) starts from it.
    pub fn remember(&mut self, generation: i32, by_worker: BTreeMap<String, BTreeSet<String>>) {
        if generation > self.generation {
            self.previous = by_worker;
            self.generation = generation;
        }
    }

    /// The assignment just made is that of `generation`.
    pub fn made_in(&mut self, generation: i32) {
        self.generation = generation;
    }

    /// The last assignment, by worker.
    pub fn previous(&self) -> &BTreeMap<String, BTreeSet<String>> {
        &self.previous
    }

    /// Assigns `connectors` over `members` (at least one).
    pub fn assign(
        &mut self,
        members: &[Member],
        connectors: &BTreeSet<String>,
        delay: Duration,
        now: Instant,
    ) -> Assignment {
        let alive: BTreeSet<&str> = members.iter().map(|m| m.worker.as_str()).collect();
        // Workers that left since the last assignment: their connectors are held (or, with no
        // delay, free at once).
        for (worker, had) in &self.previous {
            if !alive.contains(worker.as_str())
                && !self.held.contains_key(worker)
                && !delay.is_zero()
            {
                self.held.insert(worker.clone(), (now + delay, had.clone()));
            }
        }
        // What each worker had: its last assignment, or what is held for it.
        let mut returning: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (worker, had) in &self.previous {
            if alive.contains(worker.as_str()) {
                returning.insert(worker.clone(), had.clone());
            }
        }
        for (worker, (until, had)) in &self.held {
            if alive.contains(worker.as_str()) && *until > now {
                returning
                    .entry(worker.clone())
                    .or_default()
                    .extend(had.iter().cloned());
            }
        }
        // Held until their delay ends, or until their worker is back.
        self.held
            .retain(|worker, (until, _)| *until > now && !alive.contains(worker.as_str()));

        // What each member keeps: what it runs (first claim wins), then, for a worker that
        // came back, what it had.
        let mut order: Vec<&Member> = members.iter().collect();
        order.sort_by(|a, b| (&a.worker, &a.member_id).cmp(&(&b.worker, &b.member_id)));
        let mut claimed: BTreeSet<String> = BTreeSet::new();
        let mut kept: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for member in &order {
            let mine = kept.entry(member.member_id.as_str()).or_default();
            for c in member.running.intersection(connectors) {
                if claimed.insert(c.clone()) {
                    mine.insert(c.clone());
                }
            }
        }
        for (_, connectors_held) in self.held.values_mut() {
            connectors_held.retain(|c| !claimed.contains(c));
        }
        let held: BTreeSet<String> = self
            .held
            .values()
            .flat_map(|(_, c)| c.iter().cloned())
            .filter(|c| connectors.contains(c))
            .collect();
        for member in &order {
            if let Some(had) = returning.get(member.worker.as_str()) {
                let mine = kept
                    .get_mut(member.member_id.as_str())
                    .expect("every member");
                for c in had.intersection(connectors) {
                    if !held.contains(c) && claimed.insert(c.clone()) {
                        mine.insert(c.clone());
                    }
                }
            }
        }

        // Capacities: ⌈M/N⌉ for the members that keep the most, ⌊M/N⌋ for the others.
        let placed: BTreeSet<&String> = connectors.iter().filter(|c| !held.contains(*c)).collect();
        let n = members.len().max(1);
        let (base, extra) = (placed.len() / n, placed.len() % n);
        let mut by_kept = order.clone();
        by_kept.sort_by(|a, b| {
            kept[b.member_id.as_str()]
                .len()
                .cmp(&kept[a.member_id.as_str()].len())
                .then_with(|| a.worker.cmp(&b.worker))
                .then_with(|| a.member_id.cmp(&b.member_id))
        });
        let capacity: BTreeMap<&str, usize> = by_kept
            .iter()
            .enumerate()
            .map(|(i, m)| (m.member_id.as_str(), base + usize::from(i < extra)))
            .collect();

        // Over capacity: the last connectors (by name) go back to the pool.
        let mut pool: BTreeSet<String> = placed
            .iter()
            .filter(|c| !claimed.contains(**c))
            .map(|c| (*c).clone())
            .collect();
        for member in &order {
            let mine = kept
                .get_mut(member.member_id.as_str())
                .expect("every member");
            while mine.len() > capacity[member.member_id.as_str()] {
                let last = mine.iter().next_back().cloned().expect("over capacity");
                mine.remove(&last);
                pool.insert(last);
            }
        }
        // The pool to those under capacity, the least loaded first.
        for c in pool {
            let under = order
                .iter()
                .filter(|m| kept[m.member_id.as_str()].len() < capacity[m.member_id.as_str()])
                .min_by_key(|m| (kept[m.member_id.as_str()].len(), &m.worker, &m.member_id));
            if let Some(m) = under {
                kept.get_mut(m.member_id.as_str())
                    .expect("every member")
                    .insert(c);
            }
        }

        self.previous = order
            .iter()
            .map(|m| (m.worker.clone(), kept[m.member_id.as_str()].clone()))
            .collect();
        let rebalance_in = self
            .held
            .values()
            .filter(|(_, c)| !c.is_empty())
            .map(|(until, _)| until.saturating_duration_since(now))
            .min();
        Assignment {
            by_member: kept.into_iter().map(|(m, c)| (m.to_owned(), c)).collect(),
            rebalance_in,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> BTreeSet<String> {
        (0..n).map(|i| format!("c{i}")).collect()
    }

    fn member(worker: &str, running: &BTreeSet<String>) -> Member {
        Member {
            member_id: format!("{worker}-member"),
            worker: worker.to_owned(),
            running: running.clone(),
        }
    }

    fn counts(a: &Assignment) -> Vec<usize> {
        a.by_member.values().map(BTreeSet::len).collect()
    }

    /// Every connector once, on exactly one member.
    fn each_once(a: &Assignment, connectors: &BTreeSet<String>) {
        let mut all = Vec::new();
        for c in a.by_member.values() {
            all.extend(c.iter().cloned());
        }
        all.sort();
        assert_eq!(all, connectors.iter().cloned().collect::<Vec<_>>(), "{a:?}");
    }

    fn run(
        leader: &mut Leader,
        workers: &[&str],
        last: &Assignment,
        connectors: &BTreeSet<String>,
        delay: Duration,
        now: Instant,
    ) -> Assignment {
        let members: Vec<Member> = workers
            .iter()
            .map(|w| {
                let running = last
                    .by_member
                    .get(&format!("{w}-member"))
                    .cloned()
                    .unwrap_or_default();
                member(w, &running)
            })
            .collect();
        leader.assign(&members, connectors, delay, now)
    }

    /// The first assignment of a new group of `workers`.
    fn start(
        leader: &mut Leader,
        workers: &[&str],
        connectors: &BTreeSet<String>,
        delay: Duration,
        now: Instant,
    ) -> Assignment {
        let none = Assignment {
            by_member: BTreeMap::new(),
            rebalance_in: None,
        };
        run(leader, workers, &none, connectors, delay, now)
    }

    fn moved(before: &Assignment, after: &Assignment) -> usize {
        after
            .by_member
            .iter()
            .map(|(m, c)| {
                c.difference(before.by_member.get(m).unwrap_or(&BTreeSet::new()))
                    .count()
            })
            .sum()
    }

    #[test]
    fn nine_connectors_on_three_workers_then_four_then_a_loss_and_a_return() {
        let connectors = names(9);
        let now = Instant::now();
        let zero = Duration::ZERO;
        let mut leader = Leader::default();
        let three = start(&mut leader, &["w1", "w2", "w3"], &connectors, zero, now);
        assert_eq!(counts(&three), vec![3, 3, 3]);
        each_once(&three, &connectors);

        // A fourth joins: it takes two, nothing else moves.
        let four = run(
            &mut leader,
            &["w1", "w2", "w3", "w4"],
            &three,
            &connectors,
            zero,
            now,
        );
        let mut c = counts(&four);
        c.sort();
        assert_eq!(c, vec![2, 2, 2, 3]);
        each_once(&four, &connectors);
        assert_eq!(moved(&three, &four), 2, "only what balance needs moves");

        // w2 dies (no delay): its connectors spread over the three left.
        let three_again = run(
            &mut leader,
            &["w1", "w3", "w4"],
            &four,
            &connectors,
            zero,
            now,
        );
        assert_eq!(counts(&three_again), vec![3, 3, 3]);
        each_once(&three_again, &connectors);
        for (m, c) in &three_again.by_member {
            assert!(four.by_member[m].is_subset(c), "survivors keep theirs: {m}");
        }
    }

    #[test]
    fn a_worker_back_within_the_delay_gets_its_connectors_back() {
        let connectors = names(9);
        let now = Instant::now();
        let delay = Duration::from_secs(10);
        let mut leader = Leader::default();
        let three = start(&mut leader, &["w1", "w2", "w3"], &connectors, delay, now);
        let w2_had = three.by_member["w2-member"].clone();

        // w2 leaves: its three are held, the others keep theirs, and a rebalance is due when
        // the delay ends.
        let two = run(
            &mut leader,
            &["w1", "w3"],
            &three,
            &connectors,
            delay,
            now + Duration::from_secs(1),
        );
        assert_eq!(counts(&two), vec![3, 3]);
        assert_eq!(two.rebalance_in, Some(Duration::from_secs(10)));

        // w2 is back (a new member id, the same worker) within the delay: its three again.
        let mut back = member("w2", &BTreeSet::new());
        back.member_id = "w2-new".into();
        let members = vec![
            member("w1", &two.by_member["w1-member"]),
            back,
            member("w3", &two.by_member["w3-member"]),
        ];
        let restored = leader.assign(&members, &connectors, delay, now + Duration::from_secs(2));
        assert_eq!(restored.by_member["w2-new"], w2_had);
        assert_eq!(
            restored.by_member["w1-member"],
            three.by_member["w1-member"]
        );
        assert_eq!(restored.rebalance_in, None);
    }

    #[test]
    fn a_new_leader_holds_the_departed_leaders_connectors() {
        let connectors = names(6);
        let now = Instant::now();
        let delay = Duration::from_secs(10);
        let mut old = Leader::default();
        let three = start(&mut old, &["w1", "w2", "w3"], &connectors, delay, now);
        // w1 led and died; w2 leads now, knowing the group's last assignment.
        let mut new = Leader::default();
        new.remember(1, old.previous().clone());
        let two = run(&mut new, &["w2", "w3"], &three, &connectors, delay, now);
        assert_eq!(counts(&two), vec![2, 2], "w1's two are held");
        assert_eq!(two.rebalance_in, Some(delay));
    }

    #[test]
    fn held_connectors_are_spread_once_the_delay_ends() {
        let connectors = names(9);
        let now = Instant::now();
        let delay = Duration::from_secs(10);
        let mut leader = Leader::default();
        let three = start(&mut leader, &["w1", "w2", "w3"], &connectors, delay, now);
        let two = run(&mut leader, &["w1", "w3"], &three, &connectors, delay, now);
        let later = run(
            &mut leader,
            &["w1", "w3"],
            &two,
            &connectors,
            delay,
            now + delay,
        );
        let mut c = counts(&later);
        c.sort();
        assert_eq!(c, vec![4, 5]);
        each_once(&later, &connectors);
        assert_eq!(later.rebalance_in, None);
    }

    #[test]
    fn two_members_claiming_one_connector_keep_it_on_one() {
        let connectors = names(2);
        let both: BTreeSet<String> = connectors.clone();
        let mut leader = Leader::default();
        let a = leader.assign(
            &[member("w1", &both), member("w2", &both)],
            &connectors,
            Duration::ZERO,
            Instant::now(),
        );
        assert_eq!(counts(&a), vec![1, 1]);
        each_once(&a, &connectors);
    }

    #[test]
    fn a_deleted_connector_is_dropped_and_a_new_one_goes_to_the_least_loaded() {
        let now = Instant::now();
        let mut leader = Leader::default();
        let first = start(&mut leader, &["w1", "w2"], &names(3), Duration::ZERO, now);
        let mut changed = names(3);
        changed.remove("c0");
        changed.insert("c9".into());
        changed.insert("c8".into());
        let second = run(
            &mut leader,
            &["w1", "w2"],
            &first,
            &changed,
            Duration::ZERO,
            now,
        );
        each_once(&second, &changed);
        assert_eq!(counts(&second), vec![2, 2]);
    }

    #[test]
    fn more_workers_than_connectors() {
        let mut leader = Leader::default();
        let members: Vec<Member> = ["w1", "w2", "w3"]
            .iter()
            .map(|w| member(w, &BTreeSet::new()))
            .collect();
        let a = leader.assign(&members, &names(1), Duration::ZERO, Instant::now());
        let mut c = counts(&a);
        c.sort();
        assert_eq!(c, vec![0, 0, 1]);
    }
}
